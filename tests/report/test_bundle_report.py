"""The bundle report: only from a verified bundle, the verifier's statistics, inert peer text,
every chart number in a table, byte-identical output."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from kiln_verify.errors import KilnError
from kiln_verify.openenv.records.summary import RolloutRecord
from kiln_verify.openenv.verify import verify_bundle
from kiln_verify.openenv.verify.stats import compute_stats
from kiln_verify.report import engine
from kiln_verify.report.bundle_facts import gather
from kiln_verify.report.document import fmt
from kiln_verify.testing.bundles import FixtureBundle, build_fixture_bundle
from tests.report.pages import chart_tables, elements

GOLDEN_HTML = "sha256:c625a9232159c698de12299112f0110bf488d19b64c82470ba57ea1b553de921"
"""The HTML report of ``build_fixture_bundle(groups=10, group_size=3)``: a change to the page, the
stylesheet or the statistics must change this on purpose."""
GOLDEN_MARKDOWN = "sha256:80b2fd7d83a7432795dec3f7740736a486ac443d9323c7ef499c9d424b9ae25e"


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def test_statistics_are_the_verifiers_own(bundle: FixtureBundle) -> None:
    facts = gather(bundle.summary)
    report = verify_bundle(bundle.summary)
    assert facts.verification == report
    assert len(facts.groups) == report.groups == 10
    assert sum(env.accumulator.count for env in facts.environments) == report.rollouts
    records = [RolloutRecord.from_json(r.to_json()) for r in _records(bundle)]
    for env in facts.environments:
        name = facts.summary.environments[env.index].identity.metadata.name
        mine = [r for r in records if r.environment_name == name]
        assert env.stats() == compute_stats(mine)  # the contract's rule on its records
    for group in facts.groups:
        mine = [r for r in records if r.group_index == group.group_index]
        assert group.stats == compute_stats(mine)
        assert group.zero_variance == (len({r.episode_return for r in mine}) == 1)


def _records(bundle: FixtureBundle) -> list[RolloutRecord]:
    from kiln_verify.openenv.records.summary import read_summary

    return list(read_summary(bundle.summary.read_bytes()).rollouts)


def test_a_bundle_verification_refuses_is_refused_with_the_verifiers_code(
    bundle: FixtureBundle,
) -> None:
    data = bytearray(bundle.dataset.read_bytes())
    data[100] ^= 1
    bundle.dataset.write_bytes(bytes(data))
    with pytest.raises(KilnError) as verified:
        verify_bundle(bundle.summary)
    with pytest.raises(KilnError) as reported:
        engine.bundle_report(bundle.summary)
    assert reported.value.code == verified.value.code == "bundle_dataset_digest_mismatch"


def test_the_same_bundle_gives_the_same_bytes_anywhere(tmp_path: Path) -> None:
    first = build_fixture_bundle(tmp_path / "a" / "deep", groups=10, group_size=3)
    second = build_fixture_bundle(tmp_path / "b", groups=10, group_size=3)
    for output_format in ("html", "markdown"):
        one = engine.bundle_report(first.summary, output_format=output_format).data
        two = engine.bundle_report(second.summary, output_format=output_format).data
        assert one == two
    html = engine.bundle_report(first.summary).data
    markdown = engine.bundle_report(first.summary, output_format="markdown").data
    assert _digest(html) == GOLDEN_HTML
    assert _digest(markdown) == GOLDEN_MARKDOWN
    assert html.endswith(b"</html>\n")
    assert str(tmp_path).encode() not in html  # no absolute paths


def test_key_numbers_are_in_the_report(bundle: FixtureBundle) -> None:
    facts = gather(bundle.summary)
    page = engine.bundle_report(bundle.summary).data.decode()
    text = " ".join(elements(page).text)
    stats = facts.summary.stats
    for value in (
        stats.mean_episode_return,
        stats.invalid_model_action_count,
        stats.protocol_error_count,
        stats.total_model_tokens,
        stats.mean_model_latency_ms,
    ):
        assert fmt(value) in text
    assert "ACTION_SCHEMA_VALIDATION_FAILED" in text
    assert "SESSION_ERROR" in text
    assert "0 of 10 groups" in text


def test_every_number_a_chart_shows_is_in_its_table(bundle: FixtureBundle) -> None:
    page = engine.bundle_report(bundle.summary).data.decode()
    charts = chart_tables(page)
    assert len(charts) >= 4  # terminations, spreads, one return histogram per environment
    for values, titles, cells in charts:
        assert values, "a small chart labels its bars"
        assert len(titles) * 2 == len(cells)
        for value in values:
            assert value in cells
        for title in titles:
            label, _, number = title.rpartition(": ")
            assert label in cells
            assert number in cells


def test_most_groups_without_variance_is_a_warning(tmp_path: Path) -> None:
    single = build_fixture_bundle(tmp_path / "single", groups=6, group_size=1)
    page = engine.bundle_report(single.summary).data.decode()
    assert "Most groups have no reward variance. 6 of 6 groups (100.0 %)" in page
    assert page.count(">no variance<") == 6
    varied = engine.bundle_report(
        build_fixture_bundle(tmp_path / "varied", groups=6, group_size=3).summary
    )
    assert b"Most groups have no reward variance" not in varied.data


def test_peer_text_renders_inert_in_html(hostile_bundle: FixtureBundle) -> None:
    page = engine.bundle_report(hostile_bundle.summary).data.decode()
    parsed = elements(page)
    assert "script" not in parsed.tags
    assert "img" not in parsed.tags
    assert not [a for a in parsed.attributes if a[1].startswith("on")]
    assert not [a for a in parsed.attributes if a[1] in ("src", "href") and ":" in a[2]]
    text = "".join(parsed.text)
    assert "<script>document.title='PWNED'</script>" in text  # shown as text, whole
    assert "onerror=\"document.title='PWNED'\"" in text
    assert "Content-Security-Policy" in page
    assert "script-src 'none'" in page.replace("&#39;", "'")


def test_peer_text_renders_inert_in_markdown(hostile_bundle: FixtureBundle) -> None:
    text = engine.bundle_report(hostile_bundle.summary, output_format="markdown").data.decode()
    outside_fences = "".join(text.split("```")[0::2])
    assert "<script" not in outside_fences
    assert "<img" not in outside_fences
    assert not re.search(r"(?<!\\)\]\(javascript:", outside_fences)  # no link forms
    assert "&lt;script&gt;" in outside_fences
    inside_fences = "".join(text.split("```")[1::2])
    assert "<script>document.title='PWNED'</script>" in inside_fences  # verbatim only in a fence


def test_a_page_loads_nothing(bundle: FixtureBundle) -> None:
    page = engine.bundle_report(bundle.summary).data.decode()
    parsed = elements(page)
    assert not {"script", "link", "img", "iframe", "object", "embed"} & set(parsed.tags)
    for tag, name, value in parsed.attributes:
        if name in ("src", "href"):
            assert value.startswith("#"), (tag, name, value)
    assert "@import" not in page
    assert "url(" not in page
