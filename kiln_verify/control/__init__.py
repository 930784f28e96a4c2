"""The control plane's engine: server-owned rollout runs (kiln-openenv-contract §10-§13).

=================  =========================================================================
module             job
=================  =========================================================================
``request``        ``OpenEnvRunRequest`` and the inspect / task-catalog request records
``status``         ``kiln.openenv-run.v5`` status, failure, list and discovery answer records
``config``         the ``kiln-verify serve --config`` TOML file, validated at start
``admission``      body -> normalized request -> the server's policy -> collector controls
``registry``       tracked runs, idempotency bindings, FIFO admission, cancellation, restart
``store``          run directories and ``run.json`` (atomic, fsynced, bounded)
``executor``       one admitted run: the library's collector, publication, the manifest
``failures``       ``kiln.openenv-run-failure.v1`` classification (§10.2)
``artifacts``      serving a manifest artifact from one verified descriptor
``discovery``      the inspect and task-catalog routes through the OpenEnv client
``metrics``        the fixed-cardinality Prometheus families (§13)
``client``         the control client: runs, start, status, cancel
``download``       the verified artifact download (§11) and its receipt
``rawget``         the one HTTP/1.1 GET that reads an artifact body to the socket's end
``schema_export``  generates ``contracts/kiln-control-plane-v1.schema.json``
=================  =========================================================================
"""
