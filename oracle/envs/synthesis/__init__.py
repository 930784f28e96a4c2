"""Synthesis tasks: infer a hidden rule from examples and answer with it."""
