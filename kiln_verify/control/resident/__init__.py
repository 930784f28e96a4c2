"""The server's resident model and the adapters it serves (docs/resident-model.md).

``kiln-verify serve --model DIR`` (or ``[model] path``) makes ``DIR`` the resident model:
the ``transformers`` policy plays adapter ``base`` with it and every adapter installed in
``<state_dir>/adapters/<name>/``, each through the verified PEFT import
(:func:`~kiln_verify.control.resident.store.install_adapter`). One module per job:

``required``  whether a resident model is configured; the typed ``model_not_loaded``
              refusal every train request and adapter route gives without one
``names``     the adapter name rule
``records``   Kiln's ``AdaptersResponse`` and its parts (``GET /v1/adapters``)
``store``     the adapter set on disk: listing, verified installation
``model``     the loaded weights, shared by every adapter's policy, loaded on first use
``serving``   which policy plays a run's ``adapter``

This package's ``__init__`` imports nothing, so the registry can import ``required`` (a few
lines) without loading the HF half.
"""
