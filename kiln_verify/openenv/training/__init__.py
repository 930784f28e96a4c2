"""The training chain's building blocks, free of any server or trainer process.

- :mod:`.selection`: which completions and groups of a complete collection go to GRPO
  (kiln-openenv-contract §5.7) and the ``TrainingSelection`` counts and warnings;
- :mod:`.lineage`: Kiln's ``kiln.openenv-training-data.v1`` records
  (``OpenEnvTrainingDataProvenanceV1`` and its parts) and their consistency rules;
- :mod:`.corpus`: that lineage derived from a selected corpus, with ``group_plan_sha256``
  and one typed code per semantic rule (§3.3);
- :mod:`.evidence`: our ``train_receipt`` and ``adapter_manifest`` records (Kiln publishes
  no schema for either), :mod:`.evidence_io` their bounded reader and grouped writer;
- :mod:`.chain`: the offline check that receipt, manifest, lineage, corpus, contract and
  adapter bytes belong together;
- :mod:`.schema_export`: ``contracts/kiln-training-v1.schema.json``.

Nothing here imports the control plane: run kinds compose these pieces from above.
"""
