"""Moved to :mod:`kiln_verify.testing.tiny_model` (shared with benchmarks and qualification)."""

from kiln_verify.testing.tiny_model import CHAT_TEMPLATE, build_tiny_model, train_tokenizer

__all__ = ["CHAT_TEMPLATE", "build_tiny_model", "train_tokenizer"]
