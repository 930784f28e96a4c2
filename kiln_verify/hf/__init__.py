"""HF/TRL export bundles, the reference runner and verified PEFT import.

=================  ===================================================================
module             contents
=================  ===================================================================
``manifest``       typed records of every hand-off document and their strict readers
``digests``        every digest of kiln-hf-trl-contract §5 (docs/hf-contract.md)
``schema_export``  generates ``contracts/kiln-hf-trl-v1.schema.json``
``runner``         the standalone reference ``train.py`` and its lock
``export``         SFT and recorded-GRPO export from a local model directory
``bundle_files``   a bundle's file names, file set and reads proven against identities
``grpo_scan``      stream verification of a GRPO corpus against its export
``replay``         token replay of GRPO groups through the exported tokenizer and template
``verify``         the order of a bundle's checks (archives, pristine, completed)
``archive_rules``  what an archive may hold, checked at each member's header
``adapter_check``  PEFT LoRA adapter vs resident model, header-only (no weights loaded)
``envelope``       the sealed import envelope of a completed bundle
``importer``       verified PEFT import into an adapter registry
``verify_import``  verifying an envelope or an installed adapter again
=================  ===================================================================

Nothing here imports :mod:`kiln_verify.openenv`; the records both halves share are
:mod:`kiln_verify.records` (the import contract in ``pyproject.toml`` checks it).
"""
