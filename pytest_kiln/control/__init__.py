"""The control-plane conformance suite: black-box cases for any server claiming the API.

Run it against a control plane (``kiln-verify serve``, or a Kiln server)::

    pytest -p kiln --kiln-control-url http://127.0.0.1:8420 --pyargs pytest_kiln.control

The cases create small rollout runs against an OpenEnv environment the server can reach:
``--kiln-control-environment URL`` names one; without it the suite starts loopback oracle
servers in-process (so the server must run on this machine). Verdicts go to the same
report as the OpenEnv suite (``--kiln-report``). See ``docs/control-plane.md``.

Importing this package imports nothing; httpx and the oracle load when a case runs.
"""
