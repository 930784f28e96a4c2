"""Mutation corpus: every meaningful change to a valid bundle is refused with its code.

Mutations are generated programmatically from two valid bundles (the records package's
reference-example bundle and a synthetic 5x2 bundle covering every termination, see
kiln_verify/testing/bundles.py). JSON-level mutations of the corpus or the replay are "rebound"
(the summary's and replay's digests recomputed over the mutated bytes) so that they reach
the semantic checks instead of stopping at the digest comparison; byte flips and
truncations are not rebound and must stop at the digest.

Outcomes:

* ``reject``: verification must fail with one of the listed codes;
* ``accept``: semantically neutral (e.g. the documented v2 relabel) and must verify;
* ``unbound``: the change only touches data that offline verification cannot bind (receipt
  fields such as ``kiln_url`` or ``temperature``, a ``final_state``'s content, observation
  fields hidden behind a non-blank ``input_text``): either outcome is allowed, but a
  rejection must still carry a shape/bundle code. Live replay binds these.
"""

from __future__ import annotations

import functools
import json
import math
import random
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kiln_verify.core.digest import sha256_bytes
from kiln_verify.core.jsonfastwrite import compact_bytes, pretty_bytes
from kiln_verify.errors import KilnError
from kiln_verify.openenv.records.prompt import (
    HARNESS_CODES,
    NO_OUTPUT_MESSAGE,
    action_content,
    harness_error_content,
    judge_model_reply,
)
from kiln_verify.openenv.records.rollout import TURN_BREAK
from kiln_verify.openenv.verify import verify_bundle
from kiln_verify.openenv.verify.tails import TailRules
from kiln_verify.testing.bundles import (
    DATASET,
    EVERY_TAIL,
    REPLAY,
    SUMMARY,
    build_fixture_bundle,
)
from tests.openenv.records.fixtures import write_fixture_bundle

BUNDLE_SEMANTIC = frozenset(
    {
        "bundle_replay_inconsistent",
        "bundle_return_mismatch",
        "bundle_header_mismatch",
        "bundle_reset_plan_mismatch",
        "bundle_group_plan_mismatch",
        "bundle_messages_mismatch",
        "bundle_provenance_mismatch",
        "bundle_trajectory_mismatch",
        "bundle_record_mismatch",
        "bundle_stats_mismatch",
    }
)
DIGESTS = frozenset({"bundle_dataset_digest_mismatch", "bundle_replay_digest_mismatch"})
SHAPE = frozenset({"record_invalid", "summary_version_conflict"})
JSON_CODES = frozenset(
    {
        "json_syntax",
        "json_invalid_utf8",
        "json_non_finite",
        "json_duplicate_key",
        "json_not_object",
        "json_lone_surrogate",
        "jsonl_blank_line",
        "jsonl_missing_newline",
        "json_number_too_long",
    }
)
UNSUPPORTED = frozenset({"summary_version_unsupported", "record_schema_unsupported"})
ANY_REJECTION = (
    BUNDLE_SEMANTIC
    | DIGESTS
    | SHAPE
    | JSON_CODES
    | {"summary_version_unsupported", "record_schema_unsupported", "path_missing"}
)
CONST_KEYS = frozenset({"schema", "client_profile"})
UNBOUND_SUMMARY_KEYS = frozenset(
    {
        "kiln_url",
        "adapter_label",
        "concurrency",
        "max_action_tokens",
        "temperature",
        "thinking",
        "capacity_wait_seconds",
        "summary_output_path",
        "max_recoverable_errors",
    }
)

Files = tuple[bytes, bytes, bytes]  # dataset, replay, summary


@dataclass(frozen=True)
class Base:
    name: str
    dataset: bytes
    replay: bytes
    summary: bytes

    @property
    def lines(self) -> list[Any]:
        return [json.loads(line) for line in self.dataset.splitlines()]

    def replay_json(self) -> Any:
        return json.loads(self.replay)

    def summary_json(self) -> Any:
        return json.loads(self.summary)


@dataclass(frozen=True)
class Mutation:
    id: str
    kind: str
    build: Callable[[], Files]
    outcome: str  # reject | accept | unbound
    codes: frozenset[str] = frozenset()


def _jsonl(lines: list[Any]) -> bytes:
    return b"".join(compact_bytes(line) + b"\n" for line in lines)


def rebind(base: Base, dataset: bytes, replay: bytes, summary: Any | None = None) -> Files:
    """Recompute the digests binding the files, over possibly mutated bytes."""
    old = str(sha256_bytes(base.dataset)).encode()
    new = str(sha256_bytes(dataset)).encode()
    replay = replay.replace(old, new)
    doc = summary if summary is not None else base.summary_json()
    doc["dataset_sha256"], doc["dataset_bytes"] = new.decode(), len(dataset)
    doc["replay_sha256"], doc["replay_bytes"] = str(sha256_bytes(replay)), len(replay)
    return dataset, replay, pretty_bytes(doc)


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, (*path, index))


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


def _unbound(
    file: str, doc: Any, path: tuple[Any, ...], removal: bool = False, ulp: bool = False
) -> bool:
    if removal and path[-1] in CONST_KEYS and path != ("schema",):
        return True  # records default a missing constant key to its only value
    if file == "summary":
        return bool(path) and path[0] in UNBOUND_SUMMARY_KEYS
    if file == "replay":
        if "final_state" in path:
            return True
        for cut in range(len(path) - 1):
            if (
                path[cut] == "observation"
                and cut > 0
                and path[cut - 1]
                in (
                    "observation",
                    "reset_observation",
                )
            ):
                payload = _get(doc, path[: cut + 1])
                text = payload.get("input_text") if isinstance(payload, dict) else None
                if isinstance(text, str) and text.strip() and path[cut + 1] != "input_text":
                    return True
            if ulp and path[cut] == "observation" and path[-1] == "reward":
                payload = _get(doc, (*path[: cut + 1], "observation"))
                text = payload.get("input_text") if isinstance(payload, dict) else None
                if isinstance(text, str) and text.strip():
                    return True  # the nudge vanishes in the return's rounding
        return False
    return removal and path[-2:] == ("openenv", "discovery_sha256")


def _file_docs(base: Base) -> dict[str, Any]:
    return {"dataset": base.lines, "replay": base.replay_json(), "summary": base.summary_json()}


def _file_doc(base: Base, file: str) -> Any:
    """A fresh parse of one file only (a mutation changes one file; parsing all three
    for each build was a third of the test-side CPU)."""
    if file == "dataset":
        return base.lines
    return base.replay_json() if file == "replay" else base.summary_json()


def _emit(base: Base, file: str, doc: Any) -> Files:
    if file == "summary":
        return base.dataset, base.replay, pretty_bytes(doc)
    if file == "replay":
        return rebind(base, base.dataset, pretty_bytes(doc))
    return rebind(base, _jsonl(doc), base.replay)


def _json_mutation(
    base: Base,
    file: str,
    kind: str,
    path: tuple[Any, ...],
    change: Callable[[Any], None],
    codes: frozenset[str],
    removal: bool = False,
    ulp: bool = False,
) -> Mutation:
    def build() -> Files:
        doc = _file_doc(base, file)
        change(doc)
        return _emit(base, file, doc)

    unbound = _unbound(file, _file_doc(base, file), path, removal, ulp)
    outcome = "unbound" if unbound else "reject"
    label = "/".join(map(str, path))
    return Mutation(f"{base.name}:{file}:{kind}:{label}", kind, build, outcome, codes)


def _set(path: tuple[Any, ...], value: Any) -> Callable[[Any], None]:
    def change(doc: Any) -> None:
        _get(doc, path[:-1])[path[-1]] = value

    return change


def _delete(path: tuple[Any, ...]) -> Callable[[Any], None]:
    def change(doc: Any) -> None:
        del _get(doc, path[:-1])[path[-1]]

    return change


def _numeric(base: Base) -> Iterator[Mutation]:
    for file, doc in _file_docs(base).items():
        for path, value in _leaves(doc):
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            if isinstance(value, int):
                news: list[Any] = [value + 1, value - 1]
            else:
                news = [math.nextafter(value, math.inf), math.nextafter(value, -math.inf)]
            for new in news:
                kind = "int" if isinstance(value, int) else "ulp"
                codes = BUNDLE_SEMANTIC | SHAPE | DIGESTS
                yield _json_mutation(
                    base, file, f"{kind}{new:+}", path, _set(path, new), codes, ulp=kind == "ulp"
                )


_NEG_ZERO = "\u0000negative zero"
_NEG_ZERO_TEXT = b'"\\u0000negative zero"'


def _negative_zero(base: Base) -> Iterator[Mutation]:
    """Every integer 0 spelled ``-0``, which serde_json (and now our parser) reads as the
    float ``-0.0``: refused where the contract says integer (issue 14.7), and elsewhere a
    changed value (an integer became a float) like any other."""
    for file, doc in _file_docs(base).items():
        for path, value in _leaves(doc):
            if type(value) is not int or value != 0:
                continue

            def build(file: str = file, path: tuple[Any, ...] = path) -> Files:
                mutated = _file_doc(base, file)
                _set(path, _NEG_ZERO)(mutated)
                if file == "summary":
                    text = pretty_bytes(mutated).replace(_NEG_ZERO_TEXT, b"-0")
                    return base.dataset, base.replay, text
                if file == "replay":
                    text = pretty_bytes(mutated).replace(_NEG_ZERO_TEXT, b"-0")
                    return rebind(base, base.dataset, text)
                return rebind(base, _jsonl(mutated).replace(_NEG_ZERO_TEXT, b"-0"), base.replay)

            unbound = _unbound(file, doc, path)
            label = "/".join(map(str, path))
            yield Mutation(
                f"{base.name}:{file}:negative_zero:{label}",
                "negative_zero",
                build,
                "unbound" if unbound else "reject",
                BUNDLE_SEMANTIC | SHAPE | DIGESTS,
            )


def _fields(base: Base) -> Iterator[Mutation]:
    for file, doc in _file_docs(base).items():
        for path, value in _leaves(doc):
            if not isinstance(value, dict):
                continue
            yield _json_mutation(
                base,
                file,
                "add",
                (*path, "zz_extra"),
                _set((*path, "zz_extra"), 1),
                BUNDLE_SEMANTIC | SHAPE,
            )
            for key in value:
                yield _json_mutation(
                    base,
                    file,
                    "remove",
                    (*path, key),
                    _delete((*path, key)),
                    BUNDLE_SEMANTIC | SHAPE | DIGESTS | {"path_missing"} | UNSUPPORTED,
                    removal=True,
                )


def _flip(data: bytes, offset: int) -> bytes:
    return data[:offset] + bytes([data[offset] ^ 0x01]) + data[offset + 1 :]


def _bytes(base: Base) -> Iterator[Mutation]:
    for index, name in enumerate(("dataset", "replay", "summary")):
        data = (base.dataset, base.replay, base.summary)[index]
        offsets = sorted({0, len(data) - 1, *range(1, len(data), max(1, len(data) // 24))})

        def files(new: bytes, index: int = index) -> Files:
            out = [base.dataset, base.replay, base.summary]
            out[index] = new
            return out[0], out[1], out[2]

        for offset in offsets:
            flipped = _flip(data, offset)
            if name == "summary":
                try:
                    doc = json.loads(flipped)
                    changed = {k for k in doc if doc.get(k) != base.summary_json().get(k)}
                    changed |= set(base.summary_json()) - set(doc)
                    unbound = changed <= UNBOUND_SUMMARY_KEYS
                except (ValueError, UnicodeDecodeError, AttributeError):
                    unbound = False
                outcome, codes = ("unbound" if unbound else "reject"), ANY_REJECTION
            else:
                outcome = "reject"
                codes = frozenset({f"bundle_{name}_digest_mismatch"})
            yield Mutation(
                f"{base.name}:{name}:flip@{offset}",
                "byte_flip",
                functools.partial(files, flipped),
                outcome,
                codes,
            )
        # (the summary is not hashed: dropping only its final LF is neutral)
        for cut in (1, len(data) // 3, len(data) - 1 - (name == "summary")):
            codes = (
                JSON_CODES if name == "summary" else frozenset({f"bundle_{name}_digest_mismatch"})
            )
            yield Mutation(
                f"{base.name}:{name}:truncate@{cut}",
                "truncation",
                functools.partial(files, data[:cut]),
                "reject",
                codes,
            )


def _text_rebound(
    base: Base, file: str, pattern: str, repl: str, kind: str, codes: frozenset[str]
) -> Mutation:
    def build() -> Files:
        if file == "summary":
            return (
                base.dataset,
                base.replay,
                re.sub(pattern.encode(), repl.encode(), base.summary, count=1),
            )
        if file == "replay":
            new = re.sub(pattern.encode(), repl.encode(), base.replay, count=1)
            return rebind(base, base.dataset, new)
        new = re.sub(pattern.encode(), repl.encode(), base.dataset, count=1)
        return rebind(base, new, base.replay)

    return Mutation(f"{base.name}:{file}:{kind}", kind, build, "reject", codes)


def _structural(base: Base) -> Iterator[Mutation]:
    semantic = BUNDLE_SEMANTIC
    duplicate = frozenset({"json_duplicate_key"})
    nan = frozenset({"json_non_finite"})
    yield _text_rebound(
        base, "dataset", r'\{"([a-z_]+)":', r'{"\1":0,"\1":', "duplicate_key", duplicate
    )
    yield _text_rebound(base, "dataset", r'"reward":-?\d+\.\d+', '"reward":NaN', "nan", nan)
    for file in ("replay", "summary"):
        yield _text_rebound(
            base,
            file,
            r'\{\n(\s+)"([a-z_]+)": ',
            r'{\n\1"\2": 0,\n\1"\2": ',
            "duplicate_key",
            duplicate,
        )
        yield _text_rebound(
            base, file, r'"episode_return": -?\d+\.\d+', '"episode_return": NaN', "nan", nan
        )
        yield _text_rebound(
            base,
            file,
            r'"protocol_error_reward": -?\d+\.\d+',
            '"protocol_error_reward": Infinity',
            "infinity",
            nan,
        )
    lines = base.lines
    summary = base.summary_json()
    replay = base.replay_json()
    if len(lines) > 1:
        yield Mutation(
            f"{base.name}:dataset:reorder_lines",
            "reorder",
            lambda: rebind(base, _jsonl([*lines[1:], lines[0]]), base.replay),
            "reject",
            semantic,
        )
        yield Mutation(
            f"{base.name}:dataset:drop_last_line",
            "truncation",
            lambda: rebind(base, _jsonl(lines[:-1]), base.replay),
            "reject",
            semantic,
        )
        yield Mutation(
            f"{base.name}:dataset:duplicate_line",
            "reorder",
            lambda: rebind(base, _jsonl([*lines, lines[0]]), base.replay),
            "reject",
            semantic,
        )

        def swap_groups() -> Files:
            doc = base.replay_json()
            doc["groups"][0], doc["groups"][1] = doc["groups"][1], doc["groups"][0]
            return rebind(base, base.dataset, pretty_bytes(doc))

        def swap_groups_reindexed() -> Files:
            doc = base.replay_json()
            doc["groups"][0], doc["groups"][1] = doc["groups"][1], doc["groups"][0]
            for index, group in enumerate(doc["groups"]):
                group["group_index"] = index
            return rebind(base, base.dataset, pretty_bytes(doc))

        yield Mutation(f"{base.name}:replay:swap_groups", "swap", swap_groups, "reject", semantic)
        yield Mutation(
            f"{base.name}:replay:swap_groups_reindexed",
            "swap",
            swap_groups_reindexed,
            "reject",
            semantic,
        )
    if len(lines[0]["completions"]) > 1:

        def swap_completions() -> Files:
            doc = base.lines
            c = doc[0]["completions"]
            c[0], c[1] = c[1], c[0]
            return rebind(base, _jsonl(doc), base.replay)

        def swap_candidates() -> Files:
            doc = base.replay_json()
            c = doc["groups"][0]["candidates"]
            c[0], c[1] = c[1], c[0]
            c[0]["candidate_index"], c[1]["candidate_index"] = 0, 1
            return rebind(base, base.dataset, pretty_bytes(doc))

        def swap_records() -> Files:
            doc = base.summary_json()
            r = doc["rollouts"]
            r[0], r[1] = r[1], r[0]
            return base.dataset, base.replay, pretty_bytes(doc)

        yield Mutation(
            f"{base.name}:dataset:swap_completions", "swap", swap_completions, "reject", semantic
        )
        yield Mutation(
            f"{base.name}:replay:swap_candidates", "swap", swap_candidates, "reject", semantic
        )
        yield Mutation(
            f"{base.name}:summary:swap_records", "swap", swap_records, "reject", semantic
        )

    # version relabels
    def relabel(
        schema: str, drop: tuple[str, ...] = (), add: dict[str, Any] | None = None
    ) -> Callable[[], Files]:
        def build() -> Files:
            doc = base.summary_json()
            doc["schema"] = schema
            for key in drop:
                doc.pop(key, None)
            doc.update(add or {})
            return base.dataset, base.replay, pretty_bytes(doc)

        return build

    opts = {"reset_options_sha256": "sha256:" + "e" * 64}
    v2 = relabel("kiln.openenv-rollout-summary.v2", ("reset_plan_sha256", "behavior_policy"), opts)
    yield Mutation(f"{base.name}:summary:relabel_v2", "relabel", v2, "accept")
    for version in (3, 4):
        yield Mutation(
            f"{base.name}:summary:relabel_v{version}",
            "relabel",
            relabel(f"kiln.openenv-rollout-summary.v{version}", ("behavior_policy",)),
            "accept",
        )
        yield Mutation(
            f"{base.name}:summary:relabel_v{version}_keeps_policy",
            "relabel",
            relabel(f"kiln.openenv-rollout-summary.v{version}"),
            "reject",
            frozenset({"summary_version_conflict"}),
        )
    for bad in ("v1", "v6", "v5 ", "V5"):
        yield Mutation(
            f"{base.name}:summary:relabel_{bad.strip()}{'_space' if ' ' in bad else ''}",
            "relabel",
            relabel(f"kiln.openenv-rollout-summary.{bad}"),
            "reject",
            frozenset({"summary_version_unsupported"}),
        )
    yield Mutation(
        f"{base.name}:summary:relabel_v2_keeps_plan",
        "relabel",
        relabel("kiln.openenv-rollout-summary.v2", ("behavior_policy",), opts),
        "reject",
        frozenset({"summary_version_conflict"}),
    )
    yield Mutation(
        f"{base.name}:summary:v5_with_reset_options",
        "relabel",
        relabel("kiln.openenv-rollout-summary.v5", (), opts),
        "reject",
        frozenset({"summary_version_conflict"}),
    )
    yield _text_rebound(
        base,
        "replay",
        r"kiln\.openenv-replay\.v1",
        "kiln.openenv-replay.v2",
        "replay_version",
        frozenset({"record_schema_unsupported"}),
    )
    yield _text_rebound(
        base,
        "dataset",
        r"kiln\.openenv-rollout\.v1",
        "kiln.openenv-rollout.v2",
        "rollout_version",
        frozenset({"record_schema_unsupported"}),
    )
    # changed digests
    other = "sha256:" + "c" * 64
    for key, codes in (
        ("dataset_sha256", {"bundle_dataset_digest_mismatch"}),
        ("replay_sha256", {"bundle_replay_digest_mismatch"}),
        ("reset_plan_sha256", {"bundle_reset_plan_mismatch"}),
    ):
        yield Mutation(
            f"{base.name}:summary:digest_{key}",
            "digest",
            functools.partial(
                lambda k: (base.dataset, base.replay, pretty_bytes({**summary, k: other})), key
            ),
            "reject",
            frozenset(codes),
        )
    yield Mutation(
        f"{base.name}:summary:digest_uppercase",
        "digest",
        lambda: (
            base.dataset,
            base.replay,
            pretty_bytes(
                {
                    **summary,
                    "dataset_sha256": summary["dataset_sha256"].upper().replace("SHA256", "sha256"),
                }
            ),
        ),
        "reject",
        frozenset({"record_invalid", "bundle_dataset_digest_mismatch"}),
    )
    replay_other = pretty_bytes({**replay, "dataset_sha256": other})
    yield Mutation(
        f"{base.name}:replay:digest_dataset",
        "digest",
        lambda: (
            base.dataset,
            replay_other,
            pretty_bytes(
                {
                    **summary,
                    "replay_sha256": str(sha256_bytes(replay_other)),
                    "replay_bytes": len(replay_other),
                }
            ),
        ),
        "reject",
        frozenset({"bundle_dataset_digest_mismatch"}),
    )
    for key in (
        "reset_sha256",
        "action_schema_sha256",
        "environment_schema_sha256",
        "discovery_sha256",
    ):
        path = (0, "completions", 0, "openenv", key)
        yield _json_mutation(
            base,
            "dataset",
            "digest",
            path,
            _set(path, other),
            frozenset({"bundle_provenance_mismatch"}),
        )


# -- invalid-action tails (issue 14.2) ---------------------------------------------------------
# Each class rewrites one invalid-action tail consistently (``text``, warning prefix, digests)
# so that only the tail check can refuse it: the verifier re-derives the harness outcome
# from the recorded action text with the collector's rule (``judge_model_reply``).

TAIL = frozenset({"bundle_trajectory_mismatch"})
VALID_REPLIES = ('{"arm":1}', '```json\n{"arm": 0}\n```', ' {"arm": 2}\n', '```{"arm":3}```')
INVALID_REPLIES = ("pull lever", '{"arm": "z"}', "", '{"arm": 1}}', "[1]", '{"x": 1}')
OTHER_MESSAGES = (
    NO_OUTPUT_MESSAGE,
    "the model output is not one JSON object (json_syntax: Expecting value at column 1)",
    "the action violates the action schema: type at $/arm (schema $/properties/arm/type)",
    "the model output is a JSON list, not an object",
    "",
)


@dataclass(frozen=True)
class _Tail:
    line: int
    completion: int
    segment: str
    harness: dict[str, Any]
    thinking: bool
    rules: TailRules


def _tails_of(base: Base) -> list[_Tail]:
    thinking = base.summary_json()["thinking"]
    replay = base.replay_json()
    found = []
    for i, line in enumerate(base.lines):
        env = replay["groups"][i]["environment_index"]
        rules = TailRules(replay["environments"][env]["schema"]["action"])
        for j, completion in enumerate(line["completions"]):
            if completion["openenv"]["termination"] == "invalid_model_action":
                segment, harness = completion["trajectory"][-2:]
                tail = json.loads(harness["content"])["openenv_harness_error"]
                found.append(_Tail(i, j, segment["content"], tail, thinking, rules))
    return found


def _with_tail(base: Base, tail: _Tail, segment: str, harness: str) -> Callable[[], Files]:
    def build() -> Files:
        lines = base.lines
        completion = lines[tail.line]["completions"][tail.completion]
        trajectory = completion["trajectory"]
        trajectory[-2]["content"] = segment
        trajectory[-1]["content"] = harness
        trajectory[-1]["warning_prefix_len"] = len(harness.encode("utf-8"))
        completion["text"] = TURN_BREAK.join(
            s["content"] for s in trajectory if s["kind"] == "action"
        )
        return rebind(base, _jsonl(lines), base.replay)

    return build


def _reply_text(tail: _Tail, content: str) -> str:
    return action_content(content, thinking=tail.thinking, reasoning="r")


def _random_messages(rng: random.Random, message: str) -> list[str]:
    """Messages the collector would not write for this text: near misses and noise."""
    out = [message + " ", " " + message, message.upper(), message[:-1], message + "."]
    if message:
        at = rng.randrange(len(message))
        out.append(message[:at] + chr(ord(message[at]) ^ 1) + message[at + 1 :])
    alphabet = 'abcxyz {}[]":,0123456789$/é\u2028\n'
    out += ["".join(rng.choices(alphabet, k=rng.randrange(1, 40))) for _ in range(12)]
    return [m for m in dict.fromkeys(out) if m != message]


def _tail_mutations(base: Base) -> Iterator[Mutation]:
    rng = random.Random(14)
    for n, tail in enumerate(_tails_of(base)):
        code, message = tail.harness["code"], tail.harness["message"]
        name = f"{base.name}:dataset:tail{n}"

        def reject(
            kind: str, label: str, segment: str, harness: str, tail: _Tail = tail, name: str = name
        ) -> Mutation:
            build = _with_tail(base, tail, segment, harness)
            return Mutation(f"{name}:{kind}:{label}", kind, build, "reject", TAIL)

        for other in HARNESS_CODES:
            if other == code:
                continue
            yield reject("tail_relabel", other, tail.segment, harness_error_content(other, message))
            for m, text in enumerate(OTHER_MESSAGES):
                if text != message:
                    harness = harness_error_content(other, text)
                    yield reject("tail_relabel", f"{other}:{m}", tail.segment, harness)
        for v, content in enumerate(VALID_REPLIES):
            segment = _reply_text(tail, content)
            for each in HARNESS_CODES:
                for m, text in enumerate((message, OTHER_MESSAGES[v % len(OTHER_MESSAGES)])):
                    harness = harness_error_content(each, text)
                    yield reject("tail_valid_action", f"{v}:{each}:{m}", segment, harness)
        no_output = harness_error_content("MODEL_ACTION_NO_OUTPUT", NO_OUTPUT_MESSAGE)
        for a, content in enumerate(("pull lever", '{"arm": "z"}', *VALID_REPLIES)):
            yield reject("tail_no_output_answer", str(a), _reply_text(tail, content), no_output)
        if tail.thinking:  # the collector writes no </think> when there is no final content
            yield reject("tail_no_output_answer", "closed", "r</think>  ", no_output)
        for m, text in enumerate(_random_messages(rng, message)):
            harness = harness_error_content(code, text)
            yield reject("tail_message", str(m), tail.segment, harness)
        compact = harness_error_content(code, message)
        for r, respelled in enumerate(
            (
                json.dumps(json.loads(compact)),  # spaces
                json.dumps(json.loads(compact), ensure_ascii=True).replace(" ", ""),
                compact_bytes({"done": True, "openenv_harness_error": tail.harness}).decode(),
                compact.replace('"done":true', '"done":true,"extra":1'),
            )
        ):
            if respelled != compact:
                yield reject("tail_respelled", str(r), tail.segment, respelled)
        for c, content in enumerate(INVALID_REPLIES):  # the collector's own tails verify
            reply = judge_model_reply(content, "r", thinking=tail.thinking, rules=tail.rules)
            assert reply.code is not None
            assert reply.message is not None
            harness = harness_error_content(reply.code, reply.message)
            yield Mutation(
                f"{name}:tail_rederived:{c}",
                "tail_rederived",
                _with_tail(base, tail, reply.text, harness),
                "accept",
            )


@functools.cache
def _tail_bases() -> tuple[Base, ...]:
    """Bundles with every harness kind in their tails, thinking on and off."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, thinking in (("tails", True), ("tails-nothink", False)):
            bundle = build_fixture_bundle(
                Path(tmp) / name,
                groups=6,
                group_size=5,
                thinking=thinking,
                tail_replies=EVERY_TAIL,
            )
            out.append(
                Base(
                    name,
                    bundle.dataset.read_bytes(),
                    bundle.replay.read_bytes(),
                    bundle.summary.read_bytes(),
                )
            )
    return tuple(out)


@functools.cache
def _bases() -> tuple[Base, ...]:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, maker in (
            ("fixture", write_fixture_bundle),
            ("synthetic", lambda d: build_fixture_bundle(d, groups=5, group_size=2)),
        ):
            bundle = maker(Path(tmp) / name)
            out.append(
                Base(
                    name,
                    bundle.dataset.read_bytes(),
                    bundle.replay.read_bytes(),
                    bundle.summary.read_bytes(),
                )
            )
    return tuple(out)


@functools.cache
def mutations() -> tuple[Mutation, ...]:
    found: dict[str, Mutation] = {}
    for base in _bases():
        for generator in (_bytes, _numeric, _negative_zero, _fields, _structural):
            for mutation in generator(base):
                found.setdefault(mutation.id, mutation)
    for base in (*_bases(), *_tail_bases()):
        for mutation in _tail_mutations(base):
            found.setdefault(mutation.id, mutation)
    return tuple(found.values())


def _verify(tmp_path: Path, files: Files) -> str | None:
    for name, data in zip((DATASET, REPLAY, SUMMARY), files, strict=True):
        (tmp_path / name).write_bytes(data)
    try:
        verify_bundle(tmp_path / SUMMARY)
    except KilnError as exc:
        return exc.code
    return None


def test_corpus_is_large_enough() -> None:
    counts: dict[str, int] = {}
    for mutation in mutations():
        counts[mutation.outcome] = counts.get(mutation.outcome, 0) + 1
    print(f"\nbundle mutation corpus: {len(mutations())} mutations {counts}")
    assert len(mutations()) >= 300
    assert counts["reject"] >= 300


def test_every_mutation(tmp_path: Path) -> None:
    """One test over the whole corpus (fast); failures list every offending mutation."""
    wrong: list[str] = []
    tally: dict[str, int] = {}
    tails: dict[str, list[int]] = {}  # tail class -> [tried, refused with its code]
    for index, mutation in enumerate(mutations()):
        directory = tmp_path / str(index)
        directory.mkdir()
        code = _verify(directory, mutation.build())
        if mutation.kind.startswith("tail_") or mutation.kind == "negative_zero":
            counts = tails.setdefault(mutation.kind, [0, 0])
            counts[0] += 1
            counts[1] += mutation.outcome == "reject" and code in mutation.codes
        tally[f"{mutation.outcome}:{code or 'verified'}"] = (
            tally.get(f"{mutation.outcome}:{code or 'verified'}", 0) + 1
        )
        if mutation.outcome == "accept" and code is not None:
            wrong.append(f"{mutation.id}: expected to verify, got {code}")
        elif mutation.outcome == "reject" and code not in mutation.codes:
            wrong.append(f"{mutation.id}: expected one of {sorted(mutation.codes)}, got {code}")
        elif mutation.outcome == "unbound" and code is not None and code not in ANY_REJECTION:
            wrong.append(f"{mutation.id}: unexpected code {code}")
    print(f"\nbundle mutation outcomes: {dict(sorted(tally.items()))}")
    print(f"tail and -0 classes [tried, refused]: {dict(sorted(tails.items()))}")
    assert not wrong, "\n".join(wrong[:40]) + f"\n({len(wrong)} wrong)"


@pytest.mark.parametrize("base", ["fixture", "synthetic"])
def test_bases_verify(base: str, tmp_path: Path) -> None:
    (found,) = [b for b in _bases() if b.name == base]
    assert _verify(tmp_path, (found.dataset, found.replay, found.summary)) is None
