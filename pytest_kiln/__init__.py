"""pytest-kiln: the ``kiln`` pytest plugin and the OpenEnv conformance suite.

This package module imports nothing, so loading the plugin (``pytest_kiln.plugin``, the
``pytest11`` entry point named ``kiln``) costs only pytest and the standard library; the
OpenEnv client, websockets, httpx and the oracle servers are imported inside fixtures and
case functions, when a test first needs them.

Run the conformance suite against any OpenEnv server with::

    pytest -p kiln --kiln-openenv-url http://127.0.0.1:8000 --pyargs pytest_kiln.conformance

See ``docs/conformance.md``.
"""
