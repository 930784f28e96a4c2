"""Token streams of recorded trajectories (docs/hf-contract.md, "The token stream of a
trajectory").

One rule says how a conversation and its trajectory segments become the single growing
sequence of token ids a GRPO completion records (``input_token_ids``), and which of its
positions the model sampled, which a thinking budget forced and which the environment
contributed. The rule is implemented once, here, and used on both sides of the hand-off:

============  =============================================================================
module        job
============  =============================================================================
``codec``     :class:`TokenCodec`: one tokenizer and chat template (render, encode, decode)
``stream``    the rule itself: the first turn, each next turn, the last action, forced tokens
``rerender``  :func:`rerender_trajectory`: re-derive a recorded stream and name the first
              mismatch (each kind its own error code)
============  =============================================================================

The ``transformers`` policy records with ``stream`` (each turn continues the recorded
sequence); ``hf export-grpo`` and ``hf verify`` re-render with ``rerender``; the standalone
``train.py`` mirrors both (a parity test runs them side by side). This package sits below
both ``kiln_verify.openenv`` and ``kiln_verify.hf``: it imports only the error codes, and
``tokenizers`` / ``transformers``' template renderer inside :class:`TokenCodec`.
"""

from __future__ import annotations

from kiln_verify.tokens.codec import THINK_CLOSE, TokenCodec
from kiln_verify.tokens.rerender import ActionBudget, rerender_trajectory
from kiln_verify.tokens.stream import chat_message, check_forced, last_turn, next_turn

__all__ = [
    "THINK_CLOSE",
    "ActionBudget",
    "TokenCodec",
    "chat_message",
    "check_forced",
    "last_turn",
    "next_turn",
    "rerender_trajectory",
]
