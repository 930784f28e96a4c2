"""``render`` compiles each chat template once (an LRU): what a caller sees must not change.

Every render of one template gives the text and spans a fresh compilation gives, a
template that fails to compile fails on every call (a failure is never cached into a
success), and more distinct templates than the cache holds each render as themselves.
"""

from __future__ import annotations

import pytest

from kiln_verify.hf.export.template import Rendered, _environment, render
from kiln_verify.limits import MAX_COMPILED_CHAT_TEMPLATES

TRAINING = (
    "{%- for message in messages -%}{%- if message['role'] == 'assistant' -%}"
    "{%- generation -%}{{- message['content'] -}}{%- endgeneration -%}"
    "{%- else -%}{{- message['role'] + ':' + message['content'] + '|' -}}{%- endif -%}"
    "{%- endfor -%}"
)
MESSAGES = [{"role": "user", "content": "two plus two"}, {"role": "assistant", "content": "four"}]


def test_repeated_renders_match_a_fresh_compilation() -> None:
    fresh = _environment().from_string(TRAINING).render(messages=MESSAGES)
    assert fresh == "user:two plus two|\ue000four\ue001"
    for _ in range(3):
        assert render(TRAINING, MESSAGES) == Rendered("user:two plus two|four", ((18, 22),))


def test_a_broken_template_fails_on_every_call() -> None:
    for _ in range(2):
        with pytest.raises(ValueError, match="the template failed to render"):
            render("{%- for message in messages -%}", MESSAGES)


def test_more_templates_than_the_cache_holds_each_render_as_themselves() -> None:
    templates = [f"{number}:{{{{ messages[0]['content'] }}}}" for number in range(3)]
    templates += [f"t{number}" for number in range(MAX_COMPILED_CHAT_TEMPLATES)]
    for _ in range(2):
        for template in templates:
            want = template.replace("{{ messages[0]['content'] }}", "two plus two")
            assert render(template, MESSAGES).text == want
