"""The fixtures: ``openenv_oracle``, ``openenv_endpoint``, ``openenv_client``,
``openenv_session``, the ``kiln`` marker and ``kiln_run``."""

from __future__ import annotations

import textwrap

import pytest

pytest_plugins = ["pytester"]

TESTS = textwrap.dedent("""
    import pytest


    def test_factory(openenv_oracle, kiln_run):
        from kiln_verify.openenv.protocol.client import OpenEnvClient

        handle = openenv_oracle("bandit", max_sessions=1, faults=["delay-step=0.01"])
        assert handle.running

        async def go():
            async with OpenEnvClient(handle.base_url) as client:
                session = await client.open_session()
                observation = await session.reset({"seed": 1})
                await session.close()
                return observation

        assert kiln_run(go()).done is False


    def test_endpoint_and_client(openenv_endpoint, openenv_client, kiln_run):
        assert openenv_endpoint.oracle in ("counter", "bandit")
        inspection = kiln_run(openenv_client.inspect())
        assert inspection.identity.schema_sha256


    def test_session(openenv_session, kiln_run):
        observation = kiln_run(openenv_session.reset())
        assert observation.done is False
        assert isinstance(kiln_run(openenv_session.state()), dict)


    @pytest.mark.kiln(oracle="counter", max_sessions=1, faults=["binary-frame"])
    def test_marker(openenv_endpoint, openenv_session, kiln_run):
        from kiln_verify.errors import ProtocolViolation

        assert openenv_endpoint.id == "oracle-counter-max1+binary-frame"
        assert openenv_endpoint.faults == ("binary-frame",)
        kiln_run(openenv_session.reset())
        with pytest.raises(ProtocolViolation):
            kiln_run(openenv_session.step({"amount": 1}))
""")


def test_fixtures_and_marker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(TESTS)
    result = pytester.runpytest_inprocess("-p", "kiln", "--kiln-oracle", "counter,bandit", "-v")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(
        [
            "*test_endpoint_and_client[[]oracle-counter[]] PASSED*",
            "*test_endpoint_and_client[[]oracle-bandit[]] PASSED*",
            "*test_marker[[]oracle-counter-max1+binary-frame[]] PASSED*",
        ]
    )


def test_no_endpoint_skips_with_the_fix(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(openenv_client):\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "kiln", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*no OpenEnv endpoint under test: pass --kiln-openenv-url*"])
