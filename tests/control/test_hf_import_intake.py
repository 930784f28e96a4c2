"""The import route's header rule and the client's upload channel, without a server.

The header rule (:func:`kiln_verify.control.hf_imports.intake.check_headers`) is a parser
of peer input, so a property states it whole: admitted exactly when there is one
``application/gzip`` content type, no encoding or one ``identity``, and at most one decimal
length within the cap. The channel (:mod:`kiln_verify.control_client.hf_import`) must never
hold more than its four chunks of 256 KiB, whatever the writer hands it.
"""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kiln_verify.control.hf_imports.intake import admit_name, check_headers
from kiln_verify.control_client import hf_import
from kiln_verify.errors import ApiHfImportInvalid, LimitExceeded
from kiln_verify.limits import (
    HTTP_IMPORT_UPLOAD_CHUNK_BYTES,
    HTTP_IMPORT_UPLOAD_QUEUE_CHUNKS,
    MAX_IMPORT_COMPRESSED_BYTES,
)

TYPES = st.sampled_from(
    [
        "application/gzip",
        "Application/GZIP",
        "application/gzip; charset=binary",
        " application/gzip ",
        "application/x-gzip",
        "application/json",
        "",
    ]
)
ENCODINGS = st.sampled_from(["identity", "IDENTITY", " identity", "gzip", "br", ""])
LENGTHS = st.sampled_from(
    [
        "0",
        "12",
        str(MAX_IMPORT_COMPRESSED_BYTES),
        str(MAX_IMPORT_COMPRESSED_BYTES + 1),
        "-1",
        "1e3",
        "0x10",
        " 7 ",
        "\u0661",
    ]
)


def _admitted(types: list[str], encodings: list[str], lengths: list[str]) -> bool:
    if len(types) != 1 or types[0].split(";")[0].strip().lower() != "application/gzip":
        return False
    if len(encodings) > 1 or (encodings and encodings[0].strip().lower() != "identity"):
        return False
    if len(lengths) > 1:
        return False
    if lengths:
        text = lengths[0].strip()
        return text.isascii() and text.isdigit() and int(text) <= MAX_IMPORT_COMPRESSED_BYTES
    return True


@settings(max_examples=300, deadline=None)
@given(
    types=st.lists(TYPES, max_size=2),
    encodings=st.lists(ENCODINGS, max_size=2),
    lengths=st.lists(LENGTHS, max_size=2),
)
def test_the_header_rule_admits_exactly_kilns_headers(
    types: list[str], encodings: list[str], lengths: list[str]
) -> None:
    if _admitted(types, encodings, lengths):
        check_headers(types, encodings, lengths)
    else:
        with pytest.raises(ApiHfImportInvalid):
            check_headers(types, encodings, lengths)


@pytest.mark.parametrize("name", ["", ".a", "a..b", "a/b", "é", "a" * 129, "-a", "a b"])
def test_a_name_that_cannot_be_an_archive_root_is_refused(name: str) -> None:
    with pytest.raises(ApiHfImportInvalid):
        admit_name(name)


def test_the_channel_holds_at_most_four_chunks_of_256_kib() -> None:
    channel = hf_import._Channel()
    payload = bytes(range(256)) * (4096 * 13 + 7)  # 13+ MiB in odd-sized writes
    seen: list[int] = []

    def write() -> None:
        for start in range(0, len(payload), 100_003):
            channel.write(payload[start : start + 100_003])
        channel._put(bytes(channel._pending))
        channel._put(hf_import._END)

    writer = threading.Thread(target=write)
    writer.start()
    received = bytearray()
    for chunk in channel.body([False]):
        seen.append(channel.chunks.qsize())
        received += chunk
        assert len(chunk) <= HTTP_IMPORT_UPLOAD_CHUNK_BYTES
        time.sleep(0.001)  # a slow connection: the writer must wait, not buffer
    writer.join()
    assert bytes(received) == payload
    assert max(seen) <= HTTP_IMPORT_UPLOAD_QUEUE_CHUNKS


def test_the_channel_refuses_more_than_the_compressed_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(hf_import, "MAX_IMPORT_COMPRESSED_BYTES", 1000)
    channel = hf_import._Channel()
    channel.write(bytes(1000))
    with pytest.raises(LimitExceeded):
        channel.write(b"x")
