"""The dashboard's static files (``kiln-verify serve`` at ``/ui/``): no Python here.

``index.html``, plain ES modules (``*.js``) and one stylesheet, shipped as package data and
served by :mod:`kiln_verify.server.routes.ui`. There is no build step: the files in this
folder are the files the browser runs (docs/ARCHITECTURE.md says why).
"""
