"""``POST /v1/train/hf/peft/imports/{name}``: a completed HF/TRL result installed over HTTP.

The server half of Kiln's PEFT import (kiln-hf-trl-contract §4.9, §5.8;
docs/hf-http-import.md). :func:`~kiln_verify.control.hf_imports.receive.receive_import`
admits the request (:mod:`.intake`: name, target, headers), streams the body into a
private staging directory ``.hf-peft-import-*`` inside ``<state_dir>/adapters/``, then
verifies and installs it in a worker thread (:mod:`.install`) exactly as the local
``hf import-peft --model --registry`` does, so both produce the same six files and the
same ``kiln.hf-trl-import.v1`` receipt. The staging directory is removed whatever
happens; a refusal installs nothing. Kiln's answer record, shared with the client, is
:class:`kiln_verify.hf.manifest.http_imports.ImportPeftResponse`.
"""
