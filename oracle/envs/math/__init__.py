"""One-step exact-answer math families."""
