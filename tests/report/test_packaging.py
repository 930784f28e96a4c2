"""What a user checks before trusting a package: license, changelog, metadata, documents,
and conformance clauses that point at documents the repository ships."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from pytest_kiln.cases.inventory import CASES
from pytest_kiln.control.inventory import CONTROL_CASES

ROOT = Path(__file__).resolve().parents[2]


def test_license_file_is_the_license_the_metadata_names() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == {"text": "Apache-2.0"}
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text
    assert "Version 2.0, January 2004" in text
    assert "License :: OSI Approved :: Apache Software License" in project["classifiers"]


def test_metadata_has_classifiers_and_a_changelog() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    # no project URLs until the repository has a public home: a made-up address is worse
    # than none, and every document ships in the sdist and the repository
    assert "urls" not in project
    assert any(
        c.startswith("Programming Language :: Python :: 3.11") for c in project["classifiers"]
    )
    assert "## [Unreleased]" in (ROOT / "CHANGELOG.md").read_text()


def test_the_readme_indexes_every_document() -> None:
    readme = (ROOT / "README.md").read_text()
    index = readme.split("## Documentation", 1)[1]
    documents = sorted(
        str(path.relative_to(ROOT))
        for pattern in ("docs/*.md", "*/README.md", "oracle/*.md", "CHANGELOG.md")
        for path in ROOT.glob(pattern)
        # Hidden folders are tool caches (.venv, .pytest_cache's own README), not documents.
        if not any(part.startswith(".") for part in path.relative_to(ROOT).parts)
    )
    missing = [doc for doc in dict.fromkeys(documents) if f"`{doc}`" not in index]
    assert missing == []


def _sections(document: Path) -> set[str]:
    headings = re.findall(r"^#+ (.+)$", document.read_text(), flags=re.M)
    found = set(headings)
    found.update(match.group(1) for h in headings if (match := re.match(r"(§[\d.]+) ", h)))
    return found


def test_every_clause_cites_a_shipped_document_and_section() -> None:
    clauses = {case.clause for case in CASES} | {case.clause for case in CONTROL_CASES}
    for clause in sorted(clauses):
        path, _, section = clause.partition(" ")
        document = ROOT / path
        assert document.is_file(), clause
        wanted = section.removeprefix("§ ") if section.startswith("§ ") else section
        assert wanted in _sections(document), clause


def test_ci_installs_chromium_and_requires_the_browser_tests() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    assert "apt-get install -y -q chromium" in script
    assert "export KILN_REQUIRE_BROWSER=1" in script
    assert script.index("KILN_REQUIRE_BROWSER") < script.index('bash -euo pipefail -c "$TESTS"')
