"""Chat templates of an export: the TRL training template and Kiln's native identity.

Three templates travel in a bundle (kiln-hf-trl-contract §4.1, seed "Template identities"):

* ``chat_template.jinja``: the model's inference template, byte for byte;
* ``training_chat_template.jinja``: what TRL renders, with ``{% generation %}`` blocks
  around each assistant reply so that labels cover only assistant tokens;
* ``kiln_training_chat_template.jinja``: the training template with those blocks removed
  (Kiln's native renderer cannot parse the extension; the hashes differ on purpose).

:func:`derive_training_template` rewrites a ChatML-style inference template and accepts
the result only when it renders every probe conversation to exactly the inference text
and marks every assistant reply; anything else fails with
``hf_training_template_underivable`` naming ``--training-template``. Rendering follows
Hugging Face's ``apply_chat_template`` environment (sandboxed Jinja2, ``trim_blocks``,
``lstrip_blocks``, loop controls, ``raise_exception``, ``tojson``) with the generation
extension recording character spans.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, Final

from kiln_verify.errors import HfExportInvalid, HfTrainingTemplateUnderivable
from kiln_verify.limits import MAX_COMPILED_CHAT_TEMPLATES

__all__ = [
    "GENERATION_TAGS",
    "Rendered",
    "derive_training_template",
    "has_generation_blocks",
    "native_training_template",
    "render",
]

GENERATION_OPEN: Final = re.compile(r"\{%-?\s*generation\s*-?%\}")
GENERATION_CLOSE: Final = re.compile(r"\{%-?\s*endgeneration\s*-?%\}")
GENERATION_TAGS: Final = re.compile(r"\{%-?\s*(?:end)?generation\s*-?%\}")
_START: Final = "\ue000"
_END: Final = "\ue001"

_Q = r"(?:'{0}'|\"{0}\")"
_CHATML: Final = re.compile(
    r"\{\{-\s*"
    + _Q.format(r"<\|im_start\|>")
    + r"\s*\+\s*message\["
    + _Q.format("role")
    + r"\]\s*\+\s*"
    + _Q.format(r"\\n")
    + r"\s*\+\s*message\["
    + _Q.format("content")
    + r"\]\s*\+\s*"
    + _Q.format(r"<\|im_end\|>\\n")
    + r"\s*-\}\}"
)
_CHATML_TRAINING: Final = (
    "{%- if message['role'] == 'assistant' -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- generation -%}{{- message['content'] + '<|im_end|>' -}}{%- endgeneration -%}"
    "{{- '\\n' -}}"
    "{%- else -%}{ORIGINAL}{%- endif -%}"
)

PROBES: Final[tuple[tuple[dict[str, str], ...], ...]] = (
    (
        {"role": "user", "content": "probe question"},
        {"role": "assistant", "content": "probe answer"},
    ),
    (
        {"role": "system", "content": "probe system"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "one"},
        {"role": "user", "content": "second"},
        {"role": "assistant", "content": "two\nlines"},
    ),
)


def has_generation_blocks(template: str) -> bool:
    """The runner's test: a ``{% generation %}`` and an ``{% endgeneration %}`` tag."""
    return bool(GENERATION_OPEN.search(template) and GENERATION_CLOSE.search(template))


def native_training_template(training: str) -> str:
    """Kiln's native identity of a TRL template: the generation tags removed."""
    return GENERATION_TAGS.sub("", training)


@dataclass(frozen=True)
class Rendered:
    """A rendered conversation and the character spans inside generation blocks."""

    text: str
    spans: tuple[tuple[int, int], ...]


@cache
def _environment() -> Any:
    try:
        from jinja2 import nodes
        from jinja2.ext import Extension, loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:  # pragma: no cover - jinja2 ships with the train extra
        raise HfExportInvalid(
            "rendering chat templates needs jinja2", hint="install kiln-verify[train]"
        ) from None

    class Generation(Extension):
        tags = {"generation"}  # noqa: RUF012 - jinja2's Extension API

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            call = self.call_method("_mark", [], [], lineno=lineno)
            return nodes.CallBlock(call, [], [], body).set_lineno(lineno)

        def _mark(self, caller: Any) -> str:
            return _START + str(caller()) + _END

    def raise_exception(message: str) -> None:
        from jinja2.exceptions import TemplateError

        raise TemplateError(message)

    def tojson(value: Any, ensure_ascii: bool = False, indent: Any = None, **_: Any) -> str:
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


@lru_cache(maxsize=MAX_COMPILED_CHAT_TEMPLATES)
def _compiled(template: str) -> Any:
    """``template`` compiled once: an SFT export renders every row with the same training
    template, and compiling it (milliseconds for a real chat template) costs far more than
    rendering one conversation. A template that fails to compile raises again each time."""
    return _environment().from_string(template)


def render(
    template: str,
    messages: Sequence[Any],
    *,
    add_generation_prompt: bool = False,
    **kwargs: Any,
) -> Rendered:
    """Render like ``apply_chat_template(tokenize=False)``; generation spans by character.

    Raises ``ValueError`` for a template error or text that contains the private span
    markers (U+E000, U+E001), which cannot then be told apart from the markers.
    """
    from jinja2.exceptions import TemplateError

    for message in messages:
        if _START in json.dumps(message, ensure_ascii=False) or _END in json.dumps(
            message, ensure_ascii=False
        ):
            raise ValueError("a message contains U+E000 or U+E001")
    try:
        compiled = _compiled(template)
        raw = compiled.render(
            messages=list(messages), add_generation_prompt=add_generation_prompt, **kwargs
        )
    except TemplateError as exc:
        raise ValueError(f"the template failed to render: {exc}") from None
    text: list[str] = []
    spans: list[tuple[int, int]] = []
    length = 0
    start: int | None = None
    for piece in re.split(f"([{_START}{_END}])", raw):
        if piece == _START:
            if start is not None:
                raise ValueError("nested generation blocks")
            start = length
        elif piece == _END:
            if start is None:
                raise ValueError("unbalanced generation block")
            spans.append((start, length))
            start = None
        else:
            text.append(piece)
            length += len(piece)
    return Rendered("".join(text), tuple(spans))


def check_training_template(training: str, inference: str, *, derived: bool) -> None:
    """The TRL template renders every probe like the inference template and marks replies."""
    source = "the derived training template" if derived else "--training-template"
    hint = None
    if not derived:
        hint = (
            "--training-template must render every conversation exactly like the model's "
            "chat template, with each assistant reply (only) inside {% generation %} blocks"
        )
    for probe in PROBES:
        try:
            want = render(inference, probe).text
            got = render(training, probe)
        except ValueError as exc:
            raise HfTrainingTemplateUnderivable(f"{source}: {exc}", hint=hint) from None
        if got.text != want:
            raise HfTrainingTemplateUnderivable(
                f"{source} does not render conversations exactly like chat_template.jinja "
                "once its generation blocks are ignored",
                hint=hint,
            )
        marked = "".join(got.text[a:b] for a, b in got.spans)
        for message in probe:
            if message["role"] == "assistant" and message["content"] not in marked:
                raise HfTrainingTemplateUnderivable(
                    f"{source} does not put every assistant reply inside a generation block",
                    hint=hint,
                )
            if message["role"] != "assistant" and message["content"] in marked:
                raise HfTrainingTemplateUnderivable(
                    f"{source} puts a {message['role']} message inside a generation block",
                    hint=hint,
                )


def derive_training_template(inference: str) -> str:
    """The TRL template for ``inference``, or ``hf_training_template_underivable``.

    A template that already has generation blocks is its own training template. A
    ChatML template whose loop emits ``'<|im_start|>' + message['role'] + '\\n' +
    message['content'] + '<|im_end|>\\n'`` gets an assistant branch whose reply and
    ``<|im_end|>`` sit in a generation block. The result must pass the probe check.
    """
    if has_generation_blocks(inference):
        candidate = inference
    else:
        matches = list(_CHATML.finditer(inference))
        if len(matches) != 1:
            raise HfTrainingTemplateUnderivable(
                "cannot derive a TRL training template: the chat template has no generation "
                "blocks and is not a recognised ChatML message loop"
            )
        match = matches[0]
        replacement = _CHATML_TRAINING.replace("{ORIGINAL}", match.group(0))
        candidate = inference[: match.start()] + replacement + inference[match.end() :]
    check_training_template(candidate, inference, derived=True)
    return candidate
