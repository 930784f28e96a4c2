"""The client side of the control plane: it talks to a server only over HTTP.

==============  ========================================================================
module          job
==============  ========================================================================
``client``      :class:`ControlClient`: list, start, follow and cancel runs (§11)
``download``    :func:`download_artifact`: the verified artifact download and its receipt
``rawget``      the one HTTP/1.1 GET that reads an artifact body to the socket's end
==============  ========================================================================

It reads the control plane's wire records (:mod:`kiln_verify.control.status`,
:mod:`kiln_verify.control.request`) and imports nothing else of the server side (the
engine in :mod:`kiln_verify.control`, the application in :mod:`kiln_verify.server`); the
import contract ``control-client-apart`` in ``pyproject.toml`` keeps it so. The client of
a later route family (HF exports, imports, adapters) is one more module here.
``kiln_verify.ControlClient`` and ``kiln_verify.download_artifact`` are the public names.
"""
