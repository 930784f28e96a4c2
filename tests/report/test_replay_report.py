"""The replay report: real drift over sockets against the oracle, rendered to exact bytes; a
strict reader of what `openenv replay --json` prints; inert peer text; a real browser."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kiln_verify.cli import app
from kiln_verify.errors import KilnError
from kiln_verify.limits import MAX_REPLAY_DRIFTS_PER_CANDIDATE, REPORT_MAX_REPLAY_BYTES
from kiln_verify.openenv.policy.scripted import ScriptedPolicy
from kiln_verify.report import engine
from kiln_verify.report.replay import readable
from kiln_verify.report.replay_input import read_replay_result
from oracle.base import Outcome
from oracle.envs.counter import CounterEnvironment
from oracle.runner import ServerConfig, start_server
from tests.browser import Chromium, ink_fraction
from tests.openenv.replay.conftest import collect_bundle
from tests.report.conftest import HOSTILE
from tests.report.pages import chart_tables, elements

STEPS = MAX_REPLAY_DRIFTS_PER_CANDIDATE + 2
FIXED_SHA = "sha256:" + "5e" * 32
"""Stands in for the replay manifest's digest, the one value of a drift that depends on the
oracle's ephemeral port (the recorded base URL is part of the bundle)."""
GOLDEN_DRIFT_HTML = "sha256:147b1e5e6b975f09d95a3a6a57039f93728e97692e67d0995e8833028ade302f"
GOLDEN_DRIFT_MARKDOWN = "sha256:a49275c519fd4d0b9445c715d9e3155fcc696f20230a48a79d52c950e1c16e9c"
GOLDEN_CLEAN_HTML = "sha256:4aa638357e0100eed4d94f56ff7b8d6d92942c3ecbe760564b351e6fc3645b78"
GOLDEN_CLEAN_MARKDOWN = "sha256:abb5f29d3a5d7730c4dc9041df7953739e33fc59c2b10a9f71699d990e51c0a6"
KILN_REPORT: dict[str, Any] = {
    "schema": "kiln.openenv-replay-run.v1",
    "replay_sha256": FIXED_SHA,
    "environments": 1,
    "groups": 3,
    "rollouts": 6,
    "environment_exchanges": 12,
    "capacity_retries": 1,
    "environment_prefix_only_rollouts": 0,
}
CLEAN: dict[str, Any] = {
    "report": KILN_REPORT,
    "kiln_verify": {
        "schema": "kiln-verify.replay-run-notes.v1",
        "volatile": ["final_state.episode_id"],
        "environment_remaps": [
            {
                "environment_index": 0,
                "recorded_base_url": "http://127.0.0.1:41143",
                "base_url": "http://127.0.0.1:33019",
                "source": "oracle",
                "oracle": "bandit",
            }
        ],
    },
}


class HostileNotes(CounterEnvironment):
    """Same identity; every step now echoes markup as its note, and the state's total is a
    float: every step and every final state drifts, and the live text is hostile."""

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        outcome = super()._step(action)
        return Outcome({**outcome.observation, "last_note": HOSTILE}, outcome.reward, False)

    def _extra_state(self) -> dict[str, Any]:
        return {"total": float(self.total)}


def _replay_json(summary: Path, *extra: str) -> tuple[int, str]:
    args = ["openenv", "replay", "--summary", str(summary), "--json", "--concurrency", "1"]
    result = CliRunner().invoke(app, [*args, *extra])
    return result.exit_code, result.stdout


def _redeployed(
    directory: Path, name: str, policy: ScriptedPolicy | None, **restart: Any
) -> tuple[int, str]:
    """Collect from oracle ``name``, serve it changed on the same port, replay (--json)."""
    directory.mkdir(parents=True)
    handle = start_server(ServerConfig(name))
    try:
        summary = collect_bundle(directory, [handle.base_url], policy, groups=2, group_size=2,
                                 max_steps=STEPS if policy else 2)  # fmt: skip
    finally:
        handle.stop()
    handle = start_server(ServerConfig(name, port=handle.port, **restart))
    try:
        return _replay_json(summary)
    finally:
        handle.stop()


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Saved `openenv replay --json` outputs: counter drift, bandit reset drift, clean."""
    root = tmp_path_factory.mktemp("replays")
    files: dict[str, Path] = {}
    policy = ScriptedPolicy(['{"amount": 0, "note": "step"}'] * STEPS)
    code, out = _redeployed(root / "counter", "counter", policy, environment=HostileNotes)
    assert code == 1, out
    files["counter"] = root / "counter.json"
    files["counter"].write_text(out)
    code, out = _redeployed(root / "bandit", "bandit", None, faults=["nondeterministic-reset"])
    assert code == 1, out
    files["bandit"] = root / "bandit.json"
    files["bandit"].write_text(out)
    code, out = _replay_json(root / "bandit" / "openenv.rollout-summary.json", "--oracle")
    assert code == 0, out
    files["clean"] = root / "clean.json"
    files["clean"].write_text(out)
    return files


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _fixed(path: Path, tmp_path: Path) -> Path:
    document = json.loads(path.read_text())
    document["error"]["detail"]["replay_sha256"] = FIXED_SHA
    fixed = tmp_path / "fixed.json"
    fixed.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    return fixed


def _write(tmp_path: Path, document: Any, name: str = "doc.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    return path


def test_a_real_drift_renders_to_the_same_bytes(saved: dict[str, Path], tmp_path: Path) -> None:
    fixed = _fixed(saved["counter"], tmp_path)
    html = engine.replay_report(fixed).data
    markdown = engine.replay_report(fixed, output_format="markdown").data
    assert html == engine.replay_report(fixed).data
    assert _digest(html) == GOLDEN_DRIFT_HTML
    assert _digest(markdown) == GOLDEN_DRIFT_MARKDOWN
    assert html.endswith(b"</html>\n")
    assert str(tmp_path).encode() not in html


def test_every_kept_drift_is_shown_by_candidate(saved: dict[str, Path]) -> None:
    page = engine.replay_report(saved["counter"]).data.decode()
    parsed = elements(page)
    text = " ".join(parsed.text)
    assert "Drift: 4 of 4 candidates and 40 of 40 step exchanges drifted" in text
    for number in range(1, 5):
        assert f'<details open id="candidate-{number}"' in page
        assert f'<a href="#candidate-{number}">CounterEnvironment</a>' in page
    assert "group 1 · candidate 1: 10 of 10 step exchanges, final state drifted" in text
    kept = 4 * MAX_REPLAY_DRIFTS_PER_CANDIDATE
    assert page.count('<pre class="diff">') == kept
    assert page.count('<mark class="tone-bad">step&#34;</mark>') == kept  # the recorded note
    assert page.count("And 3 more drifted exchanges of this candidate") == 4
    assert "step 7 · observation.observation.last_note · differs at character 0" in text
    assert "final_state.episode_id" in text  # volatile
    assert "None: every environment was replayed at its recorded base URL." in text
    assert "Likely cause: the same actions after an identical reset" in text
    for values, titles, cells in chart_tables(page):
        assert values == ["0", "40", "4", "0"]
        assert len(titles) * 2 == len(cells)


def test_a_reset_window_reads_as_the_text_it_is(saved: dict[str, Path]) -> None:
    page = engine.replay_report(saved["bandit"]).data.decode()
    markdown = engine.replay_report(saved["bandit"], output_format="markdown").data.decode()
    error = json.loads(saved["bandit"].read_text())["error"]
    live = readable(error["drift"]["actual"])
    assert live.endswith('digit.\\n(reset nonce 1)"')  # one JSON escape, not Python's two
    assert live.startswith('…"')
    assert '<mark class="tone-good">\\n(reset nonce 1)</mark>' in page
    assert f"+ live      {live}\n" in markdown
    assert "```diff\n- recorded  …" in markdown
    assert "differs at character 697" in page
    assert "reset(seed) is not reproducible" in page
    assert page.count('<pre class="diff">') == 4  # every candidate's reset


def test_a_clean_replay_has_its_own_page(saved: dict[str, Path], tmp_path: Path) -> None:
    page = engine.replay_report(saved["clean"]).data.decode()
    text = " ".join(elements(page).text)
    assert "No drift: every recorded reset, step and final state replayed exactly" in text
    assert "embedded oracle" in text
    assert "bandit" in text
    assert "Drifted exchanges" not in text
    fixed = _write(tmp_path, CLEAN)
    html = engine.replay_report(fixed).data
    markdown = engine.replay_report(fixed, output_format="markdown").data
    assert _digest(html) == GOLDEN_CLEAN_HTML
    assert _digest(markdown) == GOLDEN_CLEAN_MARKDOWN
    assert b"http://127.0.0.1:41143" in html


def test_kiln_s_bare_report_renders_without_our_notes(tmp_path: Path) -> None:
    """Kiln's own replay writes the record alone: the page says what it cannot know."""
    page = engine.replay_report(_write(tmp_path, KILN_REPORT)).data.decode()
    text = " ".join(elements(page).text)
    assert "No drift: every recorded reset, step and final state replayed exactly" in text
    assert text.count("Not recorded: this is Kiln's kiln.openenv-replay-run.v1 report alone") == 2
    assert "41143" not in text


def test_a_report_carrying_our_old_fields_inside_kiln_s_record_is_refused(
    tmp_path: Path,
) -> None:
    legacy = {**KILN_REPORT, **CLEAN["kiln_verify"]}
    legacy["schema"] = KILN_REPORT["schema"]
    with pytest.raises(KilnError, match="Extra inputs") as failure:
        read_replay_result(_write(tmp_path, legacy))
    assert failure.value.code == "record_invalid"


def test_identity_drift_is_reported_before_and_after_the_replay(tmp_path: Path) -> None:
    policy = ScriptedPolicy(['{"amount": 1}'])
    (tmp_path / "during").mkdir()
    handle = start_server(ServerConfig("counter", faults=["identity-drift=2"]))
    try:
        summary = collect_bundle(tmp_path / "during", [handle.base_url], policy, group_size=2,
                                 max_steps=1)  # fmt: skip
        code, out = _replay_json(summary)
    finally:
        handle.stop()
    assert code == 1, out
    during = engine.replay_report(_write(tmp_path, json.loads(out), "during.json")).data.decode()
    text = " ".join(elements(during).text)
    assert "Identity drift" in text
    assert "(CounterEnvironment), after replay" in text
    assert "No candidate drifted." in text
    assert "Drift: 0 of 2 candidates and 0 of 2 step exchanges drifted" in text
    handle = start_server(ServerConfig("bandit", port=handle.port))
    try:
        code, out = _replay_json(summary)
    finally:
        handle.stop()
    assert code == 1, out
    before = engine.replay_report(_write(tmp_path, json.loads(out), "before.json")).data.decode()
    text = " ".join(elements(before).text)
    assert "Nothing was replayed: an identity differed before the replay." in text
    assert "(CounterEnvironment), before replay" in text
    assert "Drifted exchanges" not in text
    assert before.count('<pre class="diff">') == 1


def _counter(saved: dict[str, Path]) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(saved["counter"].read_text())
    return document


def _error(change: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
    return lambda document: change(document["error"])


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        (lambda d: d.update(extra=1), "exactly"),
        (_error(lambda e: e.update(code="environment_transport")), "no drift to report"),
        (_error(lambda e: e.pop("detail")), "has no detail"),
        (_error(lambda e: e.update(path="x")), "Extra inputs"),
        (_error(lambda e: e["detail"].update(extra=1)), "Extra inputs"),
        (_error(lambda e: e["drift"].update(stage="guess")), "stage"),
        (_error(lambda e: e["detail"]["candidates"][0].update(omitted_drifts=2)), "add up"),
        (_error(lambda e: e["detail"].update(omitted_candidates=1)), "add up to the totals"),
        (_error(lambda e: e["totals"].update(drifted_identities=1)), "identities"),
        (_error(lambda e: e["detail"]["candidates"].reverse()), "replay order"),
        (_error(lambda e: e["drift"].update(actual="'other'")), "not the error's drift"),
        (_error(lambda e: e["detail"]["candidates"][0]["drifts"][0].pop("step_index")), "step"),
        (_error(lambda e: e["detail"]["candidates"][0].update(drifts=[])), "at least 1"),
        (_error(lambda e: e.pop("totals")), "totals are missing"),
        (_error(lambda e: e["drifted"].pop()), "first drifted candidates"),
        (_error(lambda e: e["detail"].update(volatile=None)), "omitted rather than null"),
        (lambda d: d.clear(), "neither"),
    ],
)
def test_the_reader_refuses_anything_else(
    saved: dict[str, Path], tmp_path: Path, change: Any, rule: str
) -> None:
    document = _counter(saved)
    read_replay_result(_write(tmp_path, document))  # the original is accepted
    change(document)
    with pytest.raises(KilnError, match=rule) as failure:
        read_replay_result(_write(tmp_path, document, "bad.json"))
    assert failure.value.code == "record_invalid"


def test_the_reader_refuses_bad_json_and_huge_files(tmp_path: Path) -> None:
    duplicate = tmp_path / "dup.json"
    duplicate.write_text('{"error": {}, "error": {}}')
    with pytest.raises(KilnError) as failure:
        read_replay_result(duplicate)
    assert failure.value.code == "json_duplicate_key"
    huge = tmp_path / "huge.json"
    huge.write_bytes(b" " * (REPORT_MAX_REPLAY_BYTES + 1))
    with pytest.raises(KilnError) as failure:
        read_replay_result(huge)
    assert failure.value.code == "limit_exceeded"
    for where in ("report", "kiln_verify"):
        clean = copy.deepcopy(CLEAN)
        clean[where]["strict_state"] = True
        with pytest.raises(KilnError) as failure:
            read_replay_result(_write(tmp_path, clean))
        assert failure.value.code == "record_invalid"


def _hostile(saved: dict[str, Path], tmp_path: Path) -> Path:
    """The real drift with peer text everywhere a peer's text can reach a drift report."""
    document = _counter(saved)
    error = document["error"]
    error["rule"] += HOSTILE
    error["hint"] = HOSTILE
    for location in (error["drift"], *error["drifted"], *error["detail"]["candidates"]):
        location["environment_name"] = repr(HOSTILE)
    for candidate in error["detail"]["candidates"]:
        for drift in candidate["drifts"]:
            drift["field"] = HOSTILE
    error["drift"]["field"] = HOSTILE
    error["detail"]["volatile"] = [HOSTILE]
    return _write(tmp_path, document, "hostile.json")


def test_peer_text_renders_inert(saved: dict[str, Path], tmp_path: Path) -> None:
    path = _hostile(saved, tmp_path)
    page = engine.replay_report(path).data.decode()
    parsed = elements(page)
    assert not {"script", "img", "iframe", "object", "embed", "link"} & set(parsed.tags)
    assert not [a for a in parsed.attributes if a[1].startswith("on")]
    for _tag, name, value in parsed.attributes:
        if name in ("src", "href"):
            assert value.startswith("#")
    text = "".join(parsed.text)
    assert "<script>document.title='PWNED'</script><img src=" in text  # shown, whole
    markdown = engine.replay_report(path, output_format="markdown").data.decode()
    outside = "".join(markdown.split("```")[0::2])
    assert "<script" not in outside
    assert "<img" not in outside
    assert not re.search(r"(?<!\\)\]\(javascript:", outside)
    assert "&lt;script&gt;" in outside


def test_unprintable_peer_text_is_shown_escaped() -> None:
    assert readable(repr("a\u202eb")) == "a\\u202eb"  # a bidi override is shown, not obeyed
    assert readable("'x'... (90 chars)") == "x... (90 chars)"
    assert readable("<absent>") == "<absent>"
    assert readable("'a' + 'b'") == "'a' + 'b'"  # not exactly one quotation: left as it is
    assert readable('"\\x41"') == '"\\x41"'  # its repr would not be these bytes


def test_the_command_renders_a_saved_replay(saved: dict[str, Path], tmp_path: Path) -> None:
    runner = CliRunner()
    output = tmp_path / "replay.html"
    args = ["openenv", "report", "--replay-run", str(saved["counter"]), "-o", str(output)]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.stdout
    assert json.loads(result.stdout)["kind"] == "replay"
    assert output.read_bytes() == engine.replay_report(saved["counter"]).data
    markdown = tmp_path / "replay.md"
    result = runner.invoke(app, [*args[:-1], str(markdown), "--markdown"])
    assert result.exit_code == 0
    assert markdown.read_bytes().startswith(b"# Live replay report\n")
    both = runner.invoke(app, [*args, "--summary", "s.json"])
    assert both.exit_code == 2
    stray = runner.invoke(app, [*args[:-2], "-o", str(tmp_path / "x.html"), "--dataset", "d"])
    assert stray.exit_code == 2
    bad = tmp_path / "transport.json"
    bad.write_text('{"error": {"code": "environment_transport", "rule": "refused"}}\n')
    refused = runner.invoke(app, ["openenv", "report", "--replay-run", str(bad), "-o",
                                  str(tmp_path / "y.html"), "--json"])  # fmt: skip
    assert refused.exit_code == 1
    assert json.loads(refused.stdout)["error"]["code"] == "record_invalid"
    assert not (tmp_path / "y.html").exists()


PROBES = {
    "active": "document.querySelectorAll('script,img,iframe,object,embed,link').length",
    "title": "document.title",
    "marks": "document.querySelectorAll('pre.diff mark').length",
    "candidates": "document.querySelectorAll('details[id^=candidate-]').length",
}


def test_replay_reports_in_a_browser(
    chromium: Chromium, saved: dict[str, Path], tmp_path: Path
) -> None:
    pages = {
        "drift": engine.replay_report(_hostile(saved, tmp_path)).data,
        "clean": engine.replay_report(saved["clean"]).data,
    }
    visits = {}
    for name, data in pages.items():
        path = tmp_path / f"{name}.html"
        path.write_bytes(data)
        visit = chromium.visit(path, PROBES)
        assert visit.console_errors == []
        assert visit.requests == [visit.url]
        assert visit.probes["active"] == 0
        assert "PWNED" not in str(visit.probes["title"])
        assert ink_fraction(visit.screenshot) > 0.02
        visits[name] = visit
    drift = visits["drift"]
    assert drift.probes["candidates"] == 4
    assert drift.probes["marks"] == 2 * 4 * MAX_REPLAY_DRIFTS_PER_CANDIDATE
    for number in ("4 of 4", "40 of 40", "And 3 more drifted exchanges"):
        assert number in drift.text
    assert "<script>document.title='PWNED'</script>" in drift.text
    clean = visits["clean"]
    assert "No drift" in clean.text
    assert clean.probes["marks"] == 0
