"""The HF/TRL HTTP hand-off conformance suite: black-box cases for any server claiming
Kiln's export registry and PEFT import routes.

Run it against a server (``kiln-verify serve --model DIR``, or a Kiln server)::

    pytest -p kiln --kiln-hf-url http://127.0.0.1:8420 --pyargs pytest_kiln.hf_http

The cases only speak HTTP to that URL: the one training input they need (two SFT rows)
is built here, and the hostile import bodies are built with the standard library
(:mod:`pytest_kiln.hf_http.corpus`). Every export a case creates carries a
``kilnconf-`` name and is deleted again. Verdicts go to the same report as the other
suites (``--kiln-report``). See ``docs/conformance.md``, "HF/TRL HTTP hand-off".

Importing this package imports nothing; httpx loads when a case runs.
"""
