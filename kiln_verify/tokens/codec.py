"""One tokenizer and one chat template, as the token-stream rule uses them.

Rendering is ``transformers``' own ``render_jinja_template`` (the function behind
``apply_chat_template(tokenize=False)``), so the sandbox, filters (``tojson``), globals
(``raise_exception``, ``strftime_now``) and message normalisation are the recorder's, not
an imitation; it imports without torch. Encoding and decoding are the ``tokenizers``
library's own calls (no added special tokens; special tokens kept when decoding), which is
what a fast ``transformers`` tokenizer runs underneath.

The recorder (the ``transformers`` policy) builds its codec from the tokenizer it loaded
and may pass the special-token strings ``apply_chat_template`` would (``bos_token``, ...);
a verifier builds one from the exported ``tokenizer.json`` and ``chat_template.jinja``
(:meth:`TokenCodec.from_files`), where those strings are not exported, so a template that
needs them fails closed there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from kiln_verify.errors import HfTokenReplayUnavailable, KilnError, TokenStreamUnrenderable

__all__ = ["RESERVED_TEMPLATE_ARGUMENTS", "THINK_CLOSE", "TokenCodec"]

THINK_CLOSE: Final = "</think>"
"""The text that ends a reasoning block; a thinking budget forces its tokens."""

RESERVED_TEMPLATE_ARGUMENTS: Final = frozenset(
    {
        "messages",
        "add_generation_prompt",
        "tools",
        "tool_choice",
        "conversations",
        "documents",
        "chat_template",
        "continue_final_message",
        "return_assistant_tokens_mask",
    }
)
"""Template variables and renderer arguments the render call itself sets."""


def _renderer() -> Any:
    try:
        from transformers.utils.chat_template_utils import render_jinja_template
    except ImportError:
        raise HfTokenReplayUnavailable(
            "token streams need transformers (with jinja2) and tokenizers; refusing to "
            "record or verify a corpus without them"
        ) from None
    return render_jinja_template


class TokenCodec:
    """Render a conversation, encode text and decode ids with one tokenizer and template.

    ``tokenizer`` is a ``tokenizers.Tokenizer``; ``special_tokens`` are extra template
    variables (``bos_token``, ...), empty for a verifier.
    """

    def __init__(
        self, tokenizer: Any, template: str, *, special_tokens: Mapping[str, Any] | None = None
    ) -> None:
        self._render = _renderer()
        self._tokenizer = tokenizer
        self.template = template
        self._special_tokens = dict(special_tokens or {})
        self.special_ids: frozenset[int] = frozenset(
            int(index)
            for index, token in tokenizer.get_added_tokens_decoder().items()
            if token.special
        )

    @classmethod
    def from_files(
        cls, tokenizer_json: bytes, chat_template: bytes, *, error: type[KilnError]
    ) -> TokenCodec:
        """The codec of an exported ``tokenizer.json`` and ``chat_template.jinja``; a file
        that does not load is ``error``."""
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise HfTokenReplayUnavailable(
                "token replay needs the tokenizers package; refusing to verify without it"
            ) from None
        _renderer()
        try:
            tokenizer = Tokenizer.from_str(tokenizer_json.decode("utf-8"))
            template = chat_template.decode("utf-8")
        except Exception as exc:
            raise error(
                f"the exported tokenizer or chat template does not load: {str(exc)[:120]}"
            ) from None
        return cls(tokenizer, template)

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        invocation: Mapping[str, Any],
        *,
        generation_prompt: bool,
        error: type[KilnError] = TokenStreamUnrenderable,
    ) -> str:
        """The template's text for ``messages`` under the recorded template invocation
        (``tools``, ``tool_choice``, every ``template_kwargs`` entry)."""
        kwargs: dict[str, Any] = dict(self._special_tokens)
        template_kwargs = dict(invocation.get("template_kwargs") or {})
        clash = sorted(RESERVED_TEMPLATE_ARGUMENTS & template_kwargs.keys())
        if clash:
            raise error(f"template_kwargs sets {clash[0]!r}, which the chat template call owns")
        kwargs.update(template_kwargs)
        if invocation.get("tool_choice") is not None:
            kwargs["tool_choice"] = invocation["tool_choice"]
        try:
            rendered, _ = self._render(
                conversations=[[dict(m) for m in messages]],
                tools=invocation.get("tools"),
                chat_template=self.template,
                add_generation_prompt=generation_prompt,
                **kwargs,
            )
            text = rendered[0]
        except ImportError:
            raise HfTokenReplayUnavailable("chat templates need jinja2 >= 3.1.6") from None
        except Exception as exc:  # jinja2 template and sandbox errors, bad arguments
            raise error(
                "the conversation does not render through the chat template: "
                f"{type(exc).__name__}: {str(exc)[:160]}"
            ) from None
        if not isinstance(text, str):
            raise error("the chat template did not render text")
        return text

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without added special tokens."""
        return [int(i) for i in self._tokenizer.encode(text, add_special_tokens=False).ids]

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``, special tokens kept."""
        text: str = self._tokenizer.decode(list(ids), skip_special_tokens=False)
        return text
