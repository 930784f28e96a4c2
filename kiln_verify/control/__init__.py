"""The control plane's engine: server-owned runs (kiln-openenv-contract §10-§13).

=================  =========================================================================
module             job
=================  =========================================================================
``request``        ``OpenEnvRunRequest`` and the inspect / task-catalog request records
``status``         ``kiln.openenv-run.v5`` status, failure, list and discovery answer records
``config``         the ``kiln-verify serve --config`` TOML file, validated at start
``sections``       one configuration section per route family (``[openenv]``, ``[policies]``)
``kind``           what a run kind declares: admission, executor, progress, artifact table
``kinds``          the served run kinds (``rollout``); the one table a new kind joins
``admission``      body -> normalized request -> the server's policy -> collector controls
``registry``       tracked runs, idempotency bindings, FIFO admission, cancellation, restart
``restore``        what a restart keeps, resumes and fails (pure decisions)
``store``          run directories and ``run.json`` (atomic, fsynced, bounded)
``executor``       one admitted rollout run: the collector, publication, the manifest
``failures``       ``kiln.openenv-run-failure.v1`` classification (§10.2)
``artifacts``      serving a manifest artifact from one verified descriptor
``discovery``      the inspect and task-catalog routes through the OpenEnv client
``metrics``        the fixed-cardinality Prometheus families (§13)
``schema_export``  generates ``contracts/kiln-control-plane-v1.schema.json``
=================  =========================================================================

``request`` and ``status`` are the wire records both sides share; the client side lives
in :mod:`kiln_verify.control_client` and the HTTP application in :mod:`kiln_verify.server`.
"""
