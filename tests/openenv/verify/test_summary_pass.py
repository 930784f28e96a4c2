"""Pass 2 over the summary hands out the JSON objects pass 1 validated, unvalidated.

That is sound only while the bytes are the ones pass 1 read: a summary rewritten between
the two passes must be reported as changed (``io_failed``), however the new bytes would
otherwise fail (another valid value, a non-object, broken JSON), and never crash a check.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kiln_verify.errors import KilnError
from kiln_verify.openenv.verify import verify_bundle
from kiln_verify.openenv.verify.streams import SummaryScan
from kiln_verify.testing.bundles import build_fixture_bundle

_CHANGED = "the summary changed while it was being read"


def _between_passes(
    monkeypatch: pytest.MonkeyPatch, path: Path, edit: Callable[[bytes], bytes]
) -> list[int]:
    """Rewrite ``path`` after pass 1, just before pass 2 opens it (the count of rewrites
    is returned, so a test sees that pass 2 ran)."""
    original = SummaryScan.records
    calls: list[int] = []

    def records(self: SummaryScan) -> object:
        calls.append(1)
        path.write_bytes(edit(path.read_bytes()))
        return original(self)

    monkeypatch.setattr(SummaryScan, "records", records)
    return calls


def _replace_first_record(data: bytes) -> bytes:
    start = data.index(b'"rollouts": [\n') + len(b'"rollouts": [\n')
    end = data.index(b"\n    },", start) + len(b"\n    }")
    return data[:start] + b"    1" + data[end:]


def _swap(old: bytes, new: bytes) -> Callable[[bytes], bytes]:
    def edit(data: bytes) -> bytes:
        assert old in data
        return data.replace(old, new, 1)

    return edit


@pytest.mark.parametrize(
    "edit",
    [
        _swap(b'"model_tokens": 40', b'"model_tokens": 41'),  # another valid value
        _swap(b'"model_tokens": 40', b'"model_tokens": "x"'),  # a value of another type
        _swap(b'"episode_return": 1.5', b'"episode_return": "a"'),  # bits_equal would raise
        _swap(b'"model_tokens": 40', b'"model_tokens": 40,,'),  # no longer JSON
        _replace_first_record,  # not an object any more
    ],
    ids=["valid-value", "other-type", "float-to-string", "broken-json", "non-object"],
)
def test_a_record_changed_between_the_passes_is_reported_as_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: Callable[[bytes], bytes]
) -> None:
    bundle = build_fixture_bundle(tmp_path, groups=5, group_size=2)
    _between_passes(monkeypatch, bundle.summary, edit)
    with pytest.raises(KilnError) as caught:
        verify_bundle(bundle.summary)
    assert caught.value.code == "io_failed"
    assert _CHANGED in str(caught.value)


def test_a_change_after_the_last_record_is_caught_by_the_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every record intact, the tail changed: pass 2 ends and its digest differs."""
    bundle = build_fixture_bundle(tmp_path, groups=5, group_size=2)
    _between_passes(monkeypatch, bundle.summary, lambda data: data[:-1] + b" \n")
    with pytest.raises(KilnError) as caught:
        verify_bundle(bundle.summary)
    assert caught.value.code == "io_failed"
    assert _CHANGED in str(caught.value)


def test_an_unchanged_summary_verifies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bundle = build_fixture_bundle(tmp_path, groups=5, group_size=2)
    calls = _between_passes(monkeypatch, bundle.summary, lambda data: data)
    report = verify_bundle(bundle.summary)
    assert report.rollouts == 10
    assert calls == [1]


def test_the_typed_view_has_exactly_the_record_fields_in_order() -> None:
    """Pass 2's typed view reads the object pass 1 validated as a ``RolloutRecord``: one
    attribute per model field, in the model's order (a new field shows up here)."""
    from kiln_verify.openenv.records.summary import RolloutRecord
    from kiln_verify.openenv.verify.summary_pass import SUMMARY_RECORD_FIELDS, SummaryRecord

    assert tuple(RolloutRecord.model_fields) == SUMMARY_RECORD_FIELDS
    assert set(SummaryRecord.__slots__) == set(SUMMARY_RECORD_FIELDS)
    view = SummaryRecord({"group_index": 3, "termination": "done"})
    assert (view.group_index, view.termination, view.protocol_error_code) == (3, "done", None)
