"""The server-owned HF/TRL export registry (docs/hf-http-export.md; hf-trl-contract §4.9).

``kiln-verify serve --model DIR`` keeps immutable exports of the resident model in
``<state_dir>/hf-exports/NAME.kiln-hf``, built by the library's own writers, so an export
made over HTTP and one made by ``kiln-verify hf export-*`` from the same inputs are the same
bytes. One module per job:

============  ===========================================================================
``store``     the registry directory: private mode, entry kinds, leftovers, fail-closed scan
``create``    admission, the writers in private staging, no-replace publication
``registry``  list (self-digests only), detail and download (full verification), delete
``stream``    the deterministic ``.tar.gz`` compressed while it is sent, never held whole
``service``   the one lock and the worker threads the routes go through
============  ===========================================================================

This ``__init__`` imports nothing, so the route module loads the HF half only when a
request arrives.
"""
