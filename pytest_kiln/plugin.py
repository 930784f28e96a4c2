"""The ``kiln`` pytest plugin (``pytest11`` entry point ``kiln = "pytest_kiln.plugin"``).

Load it with ``pytest -p kiln`` (works with plugin autoload on or off); disable it with
``-p no:kiln``. Importing this module imports only pytest and the standard library.

Options (group ``kiln``; each has an ini key, and the command line wins):

- ``--kiln-openenv-url URL`` (repeatable; ini ``kiln_openenv_urls``, one URL a line)
- ``--kiln-oracle NAMES`` (comma-separated oracle server names or ``all``; ini ``kiln_oracle``)
- ``--kiln-credential-env NAME`` (ini ``kiln_credential_env``)
- ``--kiln-report PATH`` (ini ``kiln_report``; JSON; must not exist yet, by default)
- ``--kiln-report-html PATH`` (ini ``kiln_report_html``; the same report as one
  self-contained HTML page; must not exist yet, by default)
- ``--kiln-report-overwrite`` (ini ``kiln_report_overwrite``): replace existing report files
  atomically, as ``--junitxml`` does; without it an existing path is a usage error
- ``--kiln-capacity-probe N`` (ini ``kiln_capacity_probe``; sessions the capacity cases
  open at most, default 64)

State lives in typed stash keys on the config, never in ad-hoc attributes.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import pytest

from pytest_kiln.fixtures import (
    MARKER_KWARGS,
    Endpoint,
    kiln_capacity_probe,
    kiln_credential_env,
    kiln_oracle_pool,
    kiln_run,
    openenv_client,
    openenv_endpoint,
    openenv_oracle,
    openenv_session,
)
from pytest_kiln.settings import EndpointSpec, KilnSettings, kiln_settings

if TYPE_CHECKING:
    from pytest_kiln.cases import CaseResult

# the control-plane and HF/TRL HTTP suites' options
pytest_plugins = ("pytest_kiln.control.plugin", "pytest_kiln.hf_http.plugin")

__all__ = [
    "kiln_capacity_probe",
    "kiln_credential_env",
    "kiln_oracle_pool",
    "kiln_record",
    "kiln_run",
    "openenv_client",
    "openenv_endpoint",
    "openenv_oracle",
    "openenv_session",
]

URL_OPTION = "--kiln-openenv-url"
ORACLE_OPTION = "--kiln-oracle"
CREDENTIAL_OPTION = "--kiln-credential-env"
REPORT_OPTION = "--kiln-report"
REPORT_HTML_OPTION = "--kiln-report-html"
REPORT_OVERWRITE_OPTION = "--kiln-report-overwrite"
CAPACITY_PROBE_OPTION = "--kiln-capacity-probe"
MARKER = "kiln"
MARKER_DOC = (
    "kiln(*, oracle=NAME, max_sessions=N, faults=[PROFILE, ...]): run this test's "
    "openenv_endpoint/openenv_client against a fresh oracle server (see docs/conformance.md)"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kiln", "kiln OpenEnv conformance")
    group.addoption(URL_OPTION, action="append", dest="kiln_openenv_urls", default=None,
                    metavar="URL", help="OpenEnv server under test (repeatable).")
    group.addoption(ORACLE_OPTION, dest="kiln_oracle", default=None, metavar="NAMES",
                    help="Comma-separated oracle servers to start in-process as endpoints "
                         "under test, or 'all' for the whole inventory.")
    group.addoption(CREDENTIAL_OPTION, dest="kiln_credential_env", default=None,
                    metavar="NAME", help="Environment variable holding a bearer token.")
    group.addoption(REPORT_OPTION, dest="kiln_report", default=None, metavar="PATH",
                    help="Write the JSON conformance report here (must not exist, unless "
                         f"{REPORT_OVERWRITE_OPTION}).")
    group.addoption(REPORT_HTML_OPTION, dest="kiln_report_html", default=None, metavar="PATH",
                    help="Write the conformance report as one self-contained HTML page here "
                         f"(must not exist, unless {REPORT_OVERWRITE_OPTION}).")
    group.addoption(REPORT_OVERWRITE_OPTION, dest="kiln_report_overwrite", action="store_true",
                    default=None, help="Replace existing report files atomically (default: "
                                       "an existing report path is refused).")
    group.addoption(CAPACITY_PROBE_OPTION, dest="kiln_capacity_probe", default=None,
                    metavar="N", help="Concurrent sessions the capacity cases open at most "
                                      "(default 64).")
    parser.addini("kiln_openenv_urls", "OpenEnv servers under test, one per line",
                  type="linelist", default=[])
    parser.addini("kiln_oracle", "Comma-separated oracle servers to start", default="")
    parser.addini("kiln_credential_env", "Environment variable holding a bearer token",
                  default="")
    parser.addini("kiln_report", "JSON conformance report path", default="")
    parser.addini("kiln_report_html", "HTML conformance report path", default="")
    parser.addini("kiln_report_overwrite", "Replace existing report files", type="bool",
                  default=False)
    parser.addini("kiln_capacity_probe", "Sessions the capacity cases open at most",
                  default="")


def _option(config: pytest.Config, dest: str) -> Any:
    value = config.getoption(dest)
    if value in (None, "", []):
        value = config.getini(dest)
    return value or None


def _oracle_names(text: str) -> list[str]:
    from oracle.inventory import ALL_SERVERS, SERVERS

    names = [part.strip() for part in text.split(",") if part.strip()]
    if names == ["all"]:
        return list(SERVERS)
    unknown = [name for name in names if name not in ALL_SERVERS]
    if unknown or not names:
        raise pytest.UsageError(
            f"{ORACLE_OPTION}: unknown oracle server {', '.join(map(repr, unknown)) or '(none)'}"
            f"; known: all, {', '.join(ALL_SERVERS)}"
        )
    return list(dict.fromkeys(names))


def _check_url(url: str) -> str:
    from kiln_verify.errors import KilnError
    from kiln_verify.openenv.protocol.urls import normalize_base_url

    try:
        return normalize_base_url(url).base_url
    except KilnError as exc:
        raise pytest.UsageError(f"{URL_OPTION} {url!r}: {exc.rule}") from None


def _capacity_probe(value: Any) -> int:
    from pytest_kiln.cases.model import MAX_CAPACITY_PROBE

    text = str(value).strip()
    if not text.isdigit() or not 1 <= int(text) <= MAX_CAPACITY_PROBE:
        raise pytest.UsageError(
            f"{CAPACITY_PROBE_OPTION} {text!r}: give a whole number of sessions from 1 to "
            f"{MAX_CAPACITY_PROBE}"
        )
    return int(text)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_DOC)
    settings = kiln_settings(config)
    settings.urls = [_check_url(url) for url in _option(config, "kiln_openenv_urls") or []]
    oracle = _option(config, "kiln_oracle")
    settings.oracles = _oracle_names(oracle) if oracle else []
    settings.credential_env = _option(config, "kiln_credential_env")
    probe = _option(config, "kiln_capacity_probe")
    settings.capacity_probe = _capacity_probe(probe) if probe is not None else None
    overwrite = config.getoption("kiln_report_overwrite")
    settings.report_overwrite = bool(
        overwrite if overwrite is not None else config.getini("kiln_report_overwrite")
    )
    settings.report_path = _report_path(config, "kiln_report", REPORT_OPTION, settings)
    settings.report_html_path = _report_path(
        config, "kiln_report_html", REPORT_HTML_OPTION, settings
    )
    if settings.report_path is not None and settings.report_path == settings.report_html_path:
        raise pytest.UsageError(f"{REPORT_OPTION} and {REPORT_HTML_OPTION} name the same file")


def _report_path(
    config: pytest.Config, dest: str, option: str, settings: KilnSettings
) -> str | None:
    """An absolute report path; an existing one is refused unless overwriting."""
    report = _option(config, dest)
    if report is None:
        return None
    report = os.path.abspath(str(report))
    if os.path.lexists(report) and not settings.report_overwrite:
        raise pytest.UsageError(
            f"{option} {report} already exists; reports are not overwritten by default: "
            f"remove it or choose a new path (or pass {REPORT_OVERWRITE_OPTION})"
        )
    return report


def pytest_report_header(config: pytest.Config) -> str | None:
    settings = kiln_settings(config)
    if not (settings.urls or settings.oracles):
        return None
    names = [spec.id for spec in settings.endpoints]
    reports = [path for path in (settings.report_path, settings.report_html_path) if path]
    return f"kiln: endpoints={', '.join(names)}; report={', '.join(reports) or 'none'}"


def marker_options(item_or_markers: Any) -> dict[str, Any]:
    """Merge ``kiln`` marker kwargs, the closest marker winning; validate them."""
    options: dict[str, Any] = {}
    for marker in item_or_markers:
        options = marker.kwargs | options
    unknown = sorted(set(options) - MARKER_KWARGS)
    if unknown:
        raise pytest.UsageError(
            f"@pytest.mark.kiln got unknown keyword argument(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(sorted(MARKER_KWARGS))}"
        )
    max_sessions = options.get("max_sessions")
    if max_sessions is not None and (type(max_sessions) is not int or max_sessions < 1):
        raise pytest.UsageError("@pytest.mark.kiln(max_sessions=...) must be an integer >= 1")
    faults = options.get("faults", ())
    if isinstance(faults, str) or not all(isinstance(item, str) for item in faults):
        raise pytest.UsageError("@pytest.mark.kiln(faults=...) must be a list of profile strings")
    if faults:
        from oracle.faults import FaultError, parse_faults

        try:
            parse_faults(faults)
        except FaultError as exc:
            raise pytest.UsageError(f"@pytest.mark.kiln(faults=...): {exc}") from None
    oracle = options.get("oracle")
    if oracle is not None:
        if not isinstance(oracle, str) or oracle == "all" or "," in oracle:
            raise pytest.UsageError("@pytest.mark.kiln(oracle=...) must name one oracle server")
        _oracle_names(oracle)
    elif options.get("faults") or max_sessions is not None:
        raise pytest.UsageError("@pytest.mark.kiln(max_sessions/faults) needs oracle=NAME")
    return options


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "openenv_endpoint" not in metafunc.fixturenames:
        return
    markers = list(metafunc.definition.iter_markers(MARKER))
    specs: list[EndpointSpec | None]
    try:
        options = marker_options(markers) if markers else {}
    except pytest.UsageError:
        options = {}  # reported by pytest_collection_modifyitems
    if options.get("oracle"):
        specs = [EndpointSpec.for_oracle(
            options["oracle"], max_sessions=options.get("max_sessions"),
            faults=tuple(options.get("faults", ())), per_test=True)]
    else:
        specs = list(kiln_settings(metafunc.config).endpoints) or [None]
    metafunc.parametrize(
        "openenv_endpoint", specs, indirect=True,
        ids=[spec.id if spec is not None else "no-endpoint" for spec in specs],
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        markers = list(item.iter_markers(MARKER))
        if markers:
            marker_options(markers)


@pytest.fixture
def kiln_record(request: pytest.FixtureRequest) -> Any:
    """``kiln_record(endpoint, result)``: keep a case verdict for the report and add a
    ``kiln`` section to this test's report."""
    from pytest_kiln.report import RecordedResult

    settings = kiln_settings(request.config)

    def record(endpoint: Endpoint, result: CaseResult) -> None:
        settings.results.append(RecordedResult(endpoint.id, endpoint.url, result))
        request.node.add_report_section(
            "call", "kiln",
            f"{result.case_id} [{result.level.value}, {result.clause}] on {endpoint.id}: "
            f"{result.verdict.value}" + (f" ({result.detail})" if result.detail else ""),
        )

    return record


def pytest_sessionfinish(session: pytest.Session) -> None:
    settings = kiln_settings(session.config)
    if (settings.report_path is None and settings.report_html_path is None) or not settings.results:
        return
    from kiln_verify.errors import KilnError
    from pytest_kiln.report import write_report

    try:
        write_report(
            settings.report_path,
            settings.results,
            html_path=settings.report_html_path,
            overwrite=settings.report_overwrite,
        )
    except KilnError as exc:
        settings.report_error = f"{exc.code}: {exc.rule}"
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    settings = kiln_settings(config)
    if not settings.results:
        return
    from pytest_kiln.report import (
        collectable_lines,
        endpoint_table,
        summary_counts,
        summary_line,
    )

    terminalreporter.section("kiln conformance")
    for line in endpoint_table(settings.results):
        terminalreporter.write_line(line)
    for item in sorted(settings.results, key=lambda r: (r.endpoint_id, r.result.case_id)):
        result = item.result
        if result.verdict.value != "OK":
            terminalreporter.write_line(
                f"{result.verdict.value:<13} {item.endpoint_id} {result.case_id}: {result.detail}"
            )
    for line in collectable_lines(settings.results):
        terminalreporter.write_line(line)
    if settings.report_error is not None:
        terminalreporter.write_line(f"kiln report NOT written: {settings.report_error}")
    else:
        for path in (settings.report_path, settings.report_html_path):
            if path is not None:
                terminalreporter.write_line(f"kiln report written to {path}")
    terminalreporter.write_line(summary_line(summary_counts(settings.results)))
