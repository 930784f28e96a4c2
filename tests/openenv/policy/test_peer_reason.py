"""A policy server's refusal reason, read from a non-2xx body (``peer_reason``), offline.

Where servers put their reason (FastAPI's ``detail`` string or validation list, OpenAI's
``error.message``, a text body, a proxy's HTML page), what is never shown (binary bodies),
the bounds at their boundaries (``MAX_PEER_REASON_CHARS``, ``MAX_POLICY_ERROR_BODY_BYTES``)
and the credential scrub: cut out where a spelling can be cut out exactly, the whole text
withheld where one could still be undone. Real sockets: ``test_hostile_status.py``.
"""

from __future__ import annotations

import base64
import json
from urllib.parse import quote

import pytest

from kiln_verify.limits import MAX_PEER_REASON_CHARS, MAX_POLICY_ERROR_BODY_BYTES
from kiln_verify.openenv.policy.peer_reason import PeerReason, read_peer_reason, status_hint
from kiln_verify.openenv.protocol.credentials import REDACTED, BearerToken
from kiln_verify.openenv.protocol.reflection import base64_cores, spelled_in

TOKEN = "sk-reason-0123456789abcdef"
BEARER = BearerToken(TOKEN, "KILN_KEY")
PROMPT_TOO_LONG = (
    "The prompt has 1248 tokens, but the model takes at most 512, prompt and answer "
    "(`--max-model-len`)."
)  # transformers 5.25.0 serve, cli/serving/utils.py `_check_prompt_length`


def _read(body: bytes, content_type: str = "", *, complete: bool = True) -> PeerReason:
    return read_peer_reason(body, content_type=content_type, complete=complete, token=BEARER)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"detail": PROMPT_TOO_LONG}, PROMPT_TOO_LONG),
        ({"detail": [{"type": "missing", "loc": ["body", "model"], "msg": "Field required",
                      "input": {"x": 1}}]}, "body.model: Field required"),
        ({"detail": [{"loc": ["body", "n"], "msg": "a"}, {"msg": "b"}, 7]},
         "body.n: a; b; 7"),
        ({"error": {"message": "The model `x` does not exist.", "type": "NotFoundError",
                    "code": 404}}, "The model `x` does not exist."),
        ({"error": "upstream overloaded"}, "upstream overloaded"),
        ({"message": "rate limited"}, "rate limited"),
        ({"detail": {"reason": "x"}}, '{"reason":"x"}'),
        ({"unexpected": ["shape"]}, '{"unexpected":["shape"]}'),
        (["a", 1], '["a",1]'),
    ],
)  # fmt: skip
def test_json_bodies_give_the_field_the_server_put_its_reason_in(body: object, said: str) -> None:
    reason = _read(json.dumps(body).encode(), "application/json")
    assert (reason.form, reason.text) == ("said", said)
    assert reason.render() == f": the server says {said!r}"


def test_text_html_binary_and_empty_bodies() -> None:
    assert _read(b"Internal Server Error\n\n  at line 3").text == (
        "Internal Server Error at line 3"
    )
    page = b"<html><head><title>502 Bad Gateway</title></head><body><h1>x</h1></body></html>"
    assert _read(page, "text/html").render() == " with an HTML page: '502 Bad Gateway'"
    untitled = b"<!DOCTYPE html><style>p{}</style><p>Service &amp; gone</p><script>x</script>"
    assert _read(untitled).text == "Service & gone"
    assert _read(b"\x1f\x8b\x08\x00binary\xff").render() == " with a binary body of 11 bytes"
    assert _read(b"\x00" * 5).form == "binary"
    assert _read(b"").render() == " and no reason in its body"
    assert _read(b"{}").form == "empty"
    assert _read(b"  \n ").form == "empty"
    assert PeerReason.unread().render() == " and its body did not arrive in time"


def test_control_characters_and_bidi_overrides_arrive_escaped() -> None:
    reason = _read(json.dumps({"detail": "a\x1b[31mred\u202e\x07"}).encode())
    assert reason.render() == ": the server says 'a\\x1b[31mred\\u202e\\x07'"


def test_the_quoted_reason_is_cut_at_max_peer_reason_chars() -> None:
    last = _read(b"x" * MAX_PEER_REASON_CHARS).render()
    assert last == f": the server says {'x' * MAX_PEER_REASON_CHARS!r}"
    first = _read(b"x" * (MAX_PEER_REASON_CHARS + 1)).render()
    cut = f"{'x' * MAX_PEER_REASON_CHARS!r}... ({MAX_PEER_REASON_CHARS + 1} chars)"
    assert first == f": the server says {cut}"


def test_a_body_read_only_in_part_says_so() -> None:
    body = b"y" * MAX_POLICY_ERROR_BODY_BYTES
    assert "more than" not in _read(body).render()
    partial = _read(body, complete=False).render()
    assert partial.endswith(f"... (a body over more than {MAX_POLICY_ERROR_BODY_BYTES} bytes)")
    assert _read(b"\x00" * 9, complete=False).render() == (
        f" with a binary body of more than {MAX_POLICY_ERROR_BODY_BYTES} bytes"
    )
    # a read cut inside a character keeps the characters before it
    assert _read("é".encode() * 3 + b"\xc3", complete=False).text == "ééé"


def _basic(secret: str, prefix: str) -> str:
    return base64.b64encode(f"{prefix}:{secret}".encode()).decode()


@pytest.mark.parametrize(
    "spelled",
    [
        TOKEN,
        f"Bearer {TOKEN}",
        quote(TOKEN, safe=""),
        _basic(TOKEN, "u"),
        _basic(TOKEN, "user"),
        _basic(TOKEN, "usr"),
        base64.urlsafe_b64encode(TOKEN.encode()).decode(),
    ],
)
def test_a_spelling_that_can_be_cut_out_is_redacted(spelled: str) -> None:
    reason = _read(json.dumps({"detail": f"bad key {spelled} here"}).encode())
    assert reason.form == "said"
    assert REDACTED in reason.text
    assert TOKEN not in reason.render()
    assert not spelled_in(reason.render(), TOKEN, base64_cores(TOKEN))


@pytest.mark.parametrize(
    "spelled",
    [
        "\\u0073k-reason-0123456789abcdef",  # a JSON escape inside a text body
        "\\x73k-reason-0123456789abcdef",  # a Python escape
        "%2573k-reason-0123456789abcdef",  # percent-encoded twice
        "%73k-reason-0123456789abcdef",  # one character percent-encoded
        "sk-reason-0123456789\\u0061bcdef",
    ],
)
def test_a_spelling_that_cannot_be_cut_out_withholds_the_whole_text(spelled: str) -> None:
    reason = _read(f"refused: key {spelled} is not valid".encode(), "text/plain")
    assert reason.form == "withheld"
    assert reason.render() == (
        " with a body that echoes the API key from KILN_KEY; the server's reason is withheld"
    )


@pytest.mark.parametrize(
    ("token", "spelled"),
    [
        ("0123456789abcdef", "\\0\\x31" + "23456789abcdef"),  # an octal \0, or a "0"
        ("nabcdef012345678", "\\n\\x61" + "bcdef012345678"),  # a newline, or an "n"
        ("0/abcdef01234567", "\\0\\/" + "abcdef01234567"),  # JSON's \/ with an octal \0
    ],
)
def test_a_backslash_before_the_key_hides_it_from_no_reader(token: str, spelled: str) -> None:
    """Decoding every escape at once, ``\\0`` (or ``\\n``) swallows the key's first
    character; a reader who undoes only hex escapes, or only JSON's, reads that backslash as
    a plain character and the key whole (hypothesis found the first case:
    ``test_hostile_status.py``)."""
    bearer = BearerToken(token, "KILN_KEY")
    body = f"refused: key {spelled} is not valid".encode()
    reason = read_peer_reason(body, content_type="text/plain", complete=True, token=bearer)
    assert reason.form == "withheld"
    assert token not in reason.render()


def test_html_entities_cannot_smuggle_the_key() -> None:
    spelled = "".join(f"&#x{ord(char):x};" for char in TOKEN)
    reason = _read(f"<html><title>key {spelled}</title></html>".encode())
    assert reason.text == f"key {REDACTED}"


def test_without_a_key_nothing_is_scrubbed() -> None:
    reason = read_peer_reason(b"key sk-1", content_type="", complete=True, token=None)
    assert reason.text == "key sk-1"


def test_base64_cores_cover_every_alignment() -> None:
    cores = base64_cores(TOKEN)
    for prefix in ("", "a", "ab", "abc", "abcd"):
        encoded = base64.b64encode(f"{prefix}{TOKEN}!".encode()).decode()
        assert any(core in encoded for core in cores), prefix
    assert base64_cores("short") == ()  # its cores would match innocent text


@pytest.mark.parametrize(
    ("status", "said", "fragment"),
    [
        (400, PROMPT_TOO_LONG, "no longer fits the model's context"),
        (400, "Unexpected fields in the request: {'chat_template_kwargs'}", "kwargs=false"),
        (422, "body.chat_template_kwargs: Extra inputs are not permitted", "template_kwargs=false"),
        (400, "Server is pinned to '/m'; requested 'x'.", "check model=NAME"),
        (401, "", "api_key_env"),
        (404, "", "base_url"),
        (500, "", "see its log"),
        (418, "", "server's log"),
    ],
)  # fmt: skip
def test_the_hint_follows_the_server_s_words(status: int, said: str, fragment: str) -> None:
    assert fragment in status_hint(status, PeerReason("said", said))
