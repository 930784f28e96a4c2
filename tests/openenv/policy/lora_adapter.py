"""Moved to :mod:`kiln_verify.testing.lora`."""

from kiln_verify.testing.lora import build_lora_adapter

__all__ = ["build_lora_adapter"]
