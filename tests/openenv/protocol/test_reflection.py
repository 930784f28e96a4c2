"""The reflection check's proofs, as properties (no network).

Module: kiln_verify.openenv.protocol.reflection.

1. The shortcut: a JSON text without a backslash holds every string it decodes to, so the
   raw check already covers it.
2. The screen: ``orjson`` escapes per character, so a secret inside a string is inside the
   string's spelling; :func:`reflected_in_value` equals the exact walk.
3. The whole check (:func:`read_guarded`): every escaped spelling of any token at any
   position of any document is ``credential_reflected``, with a message that holds no
   spelling of it; a document without the token comes back unchanged; a document the
   parser refuses is refused as a reflection when a literal decodes to the token.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kiln_verify.core.jsonio import loads
from kiln_verify.errors import CredentialReflected, DiscoveryInvalid, KilnError
from kiln_verify.limits import MAX_DISCOVERY_BODY_BYTES
from kiln_verify.openenv.protocol.credentials import (
    BearerToken,
    check_body,
    check_header,
    read_bearer_token,
    read_guarded,
)
from kiln_verify.openenv.protocol.reflection import (
    _walk,
    escaped,
    json_spelling,
    reflected_in_literals,
    reflected_in_value,
)
from tests.openenv.protocol.hostile_peer import (
    decodes_to_token,
    escaped_spellings,
    inject,
    injections,
)

EXAMPLES = 300
strings = st.text(st.characters(codec="utf-8"), max_size=12)
plain_strings = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc"), exclude_characters='"\\'),
    max_size=12,
)
integers = st.integers(-(2**70), 2**70)  # beyond 64 bits: orjson refuses, the walk decides
scalars = st.none() | st.booleans() | integers | st.floats(allow_nan=False, allow_infinity=False)


def json_values(text: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars | text,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
        max_leaves=20,
    )


# Any token the variable may hold: printable, no whitespace or control characters, and
# including the characters JSON must escape (" and \) and non-BMP ones.
def _usable(text: str) -> bool:
    """A bearer token as a peer could reflect it: no surrounding or inner whitespace, and
    not part of the refusal's fixed wording (``schema``, from "GET /schema"; hypothesis
    draws the test's own literals): such a token is "found" in every message, whatever the
    code does with the token, so it says nothing about reflection."""
    return (
        text.strip() == text
        and not any(c.isspace() for c in text)
        and not decodes_to_token(text, _fixed_wording())
    )


tokens: st.SearchStrategy[str] = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zs", "Zl", "Zp")),
    min_size=6,
    max_size=24,
).filter(_usable)


@functools.cache
def _fixed_wording() -> str:
    """Every refusal this module provokes, as the tests read it, with a token that is in
    none of them: the text that does not depend on the token."""
    token = "Zq9-fixed-token"
    texts = []
    for label in (
        "the response to GET /metadata",
        "the response to GET /health",
        "the response to GET /schema",
        "GET /metadata",
    ):
        with pytest.raises(CredentialReflected) as caught:
            read_guarded(_token(token), f'{{"a":"{token}"}}', label, _parse)
        texts.append(json.dumps(caught.value.to_dict(), ensure_ascii=False))
    assert not any(token in text for text in texts)
    return "\n".join(texts)


def _token(value: str) -> BearerToken:
    return read_bearer_token("KILN_T", {"KILN_T": value})


def _strings(value: Any) -> list[str]:
    """Every key and string of ``value`` (the recursive reference)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    if isinstance(value, dict):
        return [*value, *(text for item in value.values() for text in _strings(item))]
    return []


def _parse(data: bytes | str) -> Any:
    return loads(data, max_bytes=MAX_DISCOVERY_BODY_BYTES)


@settings(max_examples=EXAMPLES)
@given(value=json_values(plain_strings), indent=st.none() | st.integers(0, 2),
       ascii_only=st.booleans())  # fmt: skip
def test_an_escape_free_text_holds_every_string_it_decodes_to(
    value: Any, indent: int | None, ascii_only: bool
) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    if escaped(text):
        return  # ensure_ascii escaped a character: the walk's case, not the shortcut's
    raw = text.encode("utf-8")
    assert not escaped(raw)
    parsed = _parse(raw)
    for decoded in _strings(parsed):
        assert decoded in text
        assert decoded.encode("utf-8") in raw


@settings(max_examples=EXAMPLES)
@given(before=strings, secret=strings.filter(bool), after=strings)
def test_the_screen_finds_the_spelling_of_a_secret_inside_any_string(
    before: str, secret: str, after: str
) -> None:
    assert json_spelling(secret) in orjson.dumps(before + secret + after)
    assert json_spelling(secret) in orjson.dumps({before + secret + after: [after]})


@settings(max_examples=EXAMPLES)
@given(value=json_values(strings), secret=strings.filter(bool))
def test_the_screened_answer_is_the_walk_and_the_walk_is_exact(value: Any, secret: str) -> None:
    expected = any(secret in text for text in _strings(value))
    assert _walk(value, secret) is expected
    assert reflected_in_value(value, secret, json_spelling(secret)) is expected


@settings(max_examples=EXAMPLES)
@given(data=st.data(), token=tokens, document=json_values(strings),
       as_bytes=st.booleans())  # fmt: skip
def test_every_escaped_spelling_anywhere_is_refused(
    data: st.DataObject, token: str, document: Any, as_bytes: bool
) -> None:
    text = inject(document, data.draw(injections(token)))
    body: bytes | str = text.encode("utf-8") if as_bytes else text
    bearer = _token(token)
    with pytest.raises(CredentialReflected) as caught:
        read_guarded(bearer, body, "the response to GET /metadata", _parse)
    assert caught.value.code == "credential_reflected"
    message = json.dumps(caught.value.to_dict(), ensure_ascii=False)
    assert not decodes_to_token(token, message)
    with pytest.raises(CredentialReflected):  # the body check alone (never parsed)
        check_body(bearer, body, "the response to GET /health")


@settings(max_examples=EXAMPLES)
@given(token=tokens, document=json_values(strings), ascii_only=st.booleans())
def test_a_document_without_the_token_passes_unchanged(
    token: str, document: Any, ascii_only: bool
) -> None:
    text = json.dumps(document, ensure_ascii=ascii_only, separators=(",", ":"))
    bearer = _token(token)
    if token in text or any(token in item for item in _strings(document)):
        return
    assert read_guarded(bearer, text.encode(), "body", _parse) == _parse(text.encode())
    check_body(bearer, text.encode(), "body")


@settings(max_examples=EXAMPLES)
@given(data=st.data(), token=tokens, document=json_values(strings))
def test_the_literal_scan_is_exact_on_valid_documents(
    data: st.DataObject, token: str, document: Any
) -> None:
    """Raw check or literal scan fires exactly when a decoded string holds the token."""
    text = inject(document, data.draw(injections(token))) if data.draw(st.booleans()) else (
        json.dumps(document, ensure_ascii=data.draw(st.booleans())))  # fmt: skip
    parsed = _parse(text)
    holds = any(token in item for item in _strings(parsed))
    found = reflected_in_literals(text, token)
    assert found <= holds  # never a decoded string that lacks it
    assert holds <= (token in text or found)


@settings(max_examples=EXAMPLES)
@given(data=st.data(), token=tokens)
def test_a_refused_document_is_still_searched_before_its_error(
    data: st.DataObject, token: str
) -> None:
    """A duplicate key quotes the decoded key in the parser's message: the reflection is
    reported instead, and no spelling of the token is in it."""
    spelled = data.draw(escaped_spellings(token))
    body = f'{{"{spelled}":1,"{spelled}":2}}'.encode()
    with pytest.raises(CredentialReflected) as caught:
        read_guarded(_token(token), body, "the response to GET /schema", _parse)
    assert not decodes_to_token(token, json.dumps(caught.value.to_dict(), ensure_ascii=False))
    with pytest.raises(KilnError) as plain:  # without a token: the parser's own error
        read_guarded(None, body, "body", _parse)
    assert plain.value.code == "json_duplicate_key"


def test_a_discovery_parse_error_never_quotes_the_token() -> None:
    """The client's wrapping of parse errors (DiscoveryInvalid quotes the parser's rule)
    is never reached with a reflected key."""
    token = "tok/EN-0123456789"
    body = b'{"tok\\/EN-0123456789":1,"tok\\/EN-0123456789":2}'
    with pytest.raises(CredentialReflected):
        read_guarded(_token(token), body, "GET /metadata", _parse)
    assert not issubclass(CredentialReflected, DiscoveryInvalid)


@pytest.mark.parametrize(
    "location",
    [
        "https://evil.example/?t=tok/EN-0123456789",
        "https://evil.example/?t=tok%2FEN-0123456789",
        "https://evil.example/?t=%74%6F%6B%2F%45N-0123456789",
        "https://evil.example/?t=tok%252FEN-0123456789",
    ],
)
def test_a_redirect_location_with_the_token_is_a_reflection(location: str) -> None:
    with pytest.raises(CredentialReflected) as caught:
        check_header(_token("tok/EN-0123456789"), location, "the redirect of GET /health")
    assert "0123456789" not in str(caught.value)
    check_header(_token("tok/EN-0123456789"), "https://elsewhere.example/x%2F", "redirect")
    check_header(None, location, "redirect")


def test_without_a_token_nothing_is_searched() -> None:
    body = b'{"a":"\\u0061"}'
    assert read_guarded(None, body, "body", _parse) == {"a": "a"}
    check_body(None, body, "body")
