"""Offline verification of a whole run directory (``kiln-verify openenv verify-run``).

==================  ========================================================================
module              job
==================  ========================================================================
``records``         our ``kiln-verify.run-download.v1`` and ``kiln-verify.run-verification.v1``
``files``           the run directory: its layout, ``run.json``, the manifest against the files
``bundles``         one bundle verified offline at its layout paths and read back
``evaluation``      the paired evaluation's receipt recomputed from its two bundles
``engine``          :func:`~kiln_verify.openenv.runcheck.engine.verify_run`: every link in order
``schema_export``   ``contracts/kiln-verify-run-v1.schema.json``
==================  ========================================================================

It composes the offline verifier, the training chain and the paired evaluation, and reads
the run's layout and status records from the control plane's wire records; it never
imports the server, the client or a trainer. Nothing is imported here, so the records
module can be used without loading the engines.
"""
