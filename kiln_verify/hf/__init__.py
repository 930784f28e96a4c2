"""HF/TRL export bundles, the reference runner and verified PEFT import.

=================  ===================================================================
module             contents
=================  ===================================================================
``manifest``       typed records of every hand-off document and their strict readers
``digests``        every digest of kiln-hf-trl-contract §5 (docs/hf-contract.md)
``schema_export``  generates ``contracts/kiln-hf-trl-v1.schema.json``
``runner``         the standalone reference ``train.py`` and its lock
``adapter_check``  PEFT LoRA adapter vs resident model, header-only (no weights loaded)
=================  ===================================================================
"""
