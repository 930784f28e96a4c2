"""Loading the plugin (entry point, autoload on/off, ``-p no:kiln``), options and markers."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.pytest_kiln.kilnkit import CONFORMANCE

pytest_plugins = ["pytester"]

HEAVY = (
    "torch",
    "transformers",
    "oracle",
    "websockets",
    "httpx",
    "kiln_verify.openenv.protocol.client",
)


def test_importing_the_plugin_imports_nothing_heavy() -> None:
    code = (
        "import sys, pytest_kiln.plugin, pytest_kiln.fixtures, pytest_kiln.report\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_plain_run_with_the_plugin_loaded_stays_lazy(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(
        textwrap.dedent(f"""
        import sys

        def test_nothing_heavy_loaded(request):
            assert request.config.pluginmanager.hasplugin("kiln")
            assert [m for m in {HEAVY!r} if m in sys.modules] == []
    """)
    )
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    # A fresh interpreter: in this process the suite has long imported what it asserts absent.
    result = pytester.runpytest_subprocess("-p", "kiln")
    result.assert_outcomes(passed=1)


def test_autoload_off_with_p_kiln(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = pytester.runpytest_inprocess(
        "-p", "kiln", "--kiln-oracle", "counter", "-k", "health", *CONFORMANCE
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "kiln: endpoints=oracle-counter; report=none",
            "kiln conformance: 1 OK, 0 NON-STRICT, 0 FAILED",
        ]
    )


def test_autoload_off_without_p_kiln_has_no_options(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = pytester.runpytest_inprocess("--kiln-oracle", "counter")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unrecognized arguments: --kiln-oracle*"])


def test_autoload_on_registers_the_entry_point(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    result = pytester.runpytest_inprocess(
        "--kiln-oracle", "counter", "-k", "ws.state and not shape", *CONFORMANCE
    )
    result.assert_outcomes(passed=1)


def test_p_no_kiln_disables_it(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    result = pytester.runpytest_inprocess("-p", "no:kiln", "--kiln-oracle", "counter")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unrecognized arguments: --kiln-oracle*"])


def test_help_lists_the_kiln_group(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("-p", "kiln", "--help")
    result.stdout.fnmatch_lines(
        [
            "kiln OpenEnv conformance:",
            "*--kiln-openenv-url=URL*",
            "*--kiln-oracle=NAMES*",
            "*--kiln-credential-env=NAME*",
            "*--kiln-report=PATH*",
            "*kiln_openenv_urls (linelist)*",
        ]
    )


def test_unknown_oracle_name_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("-p", "kiln", "--kiln-oracle", "bandit,nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--kiln-oracle: unknown oracle server 'nope'; known: all, *"])


def test_bad_url_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("-p", "kiln", "--kiln-openenv-url", "ftp://x")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--kiln-openenv-url 'ftp://x'*"])


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ('oracle="counter", orcle="bandit"', "*unknown keyword argument(s) orcle; allowed: *"),
        ('oracle="nope"', "*unknown oracle server 'nope'*"),
        ('oracle="counter", faults=["no-such-fault"]', "*unknown fault profile 'no-such-fault'*"),
        ('oracle="counter", max_sessions=0', "*max_sessions=...) must be an integer >= 1*"),
        ('faults=["binary-frame"]', "*needs oracle=NAME*"),
    ],
)
def test_bad_marker_is_a_usage_error(pytester: pytest.Pytester, marker: str, message: str) -> None:
    pytester.makepyfile(
        textwrap.dedent(f"""
        import pytest

        @pytest.mark.kiln({marker})
        def test_x(openenv_endpoint):
            pass
    """)
    )
    result = pytester.runpytest_inprocess("-p", "kiln")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_ini_keys_configure_the_run(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nkiln_oracle = counter\n")
    result = pytester.runpytest_inprocess(
        "-p", "kiln", "-k", "ws.reset and observation", *CONFORMANCE
    )
    result.assert_outcomes(passed=1)
