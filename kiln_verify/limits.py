"""Every size, count and duration bound, by name.

A bound lives here and nowhere else, so that docs, error messages (which name the
constant) and boundary tests all refer to one value. Where a value comes from the Kiln
reference contracts the comment cites the section of ``shared/reference``; values chosen
here say why. Byte sizes are exact powers of two (``KiB``/``MiB``/``GiB``).
"""

from __future__ import annotations

from typing import Final

KiB: Final = 1024
MiB: Final = 1024 * KiB
GiB: Final = 1024 * MiB

# --- error reporting --------------------------------------------------------------------

MAX_ERROR_SNIPPET_CHARS: Final = 80
"""Characters of peer-supplied text an error message may quote (keys, names, values)."""

MAX_DRIFT_CONTEXT_CHARS: Final = 24
"""Characters a replay drift shows *before* the first differing character of two strings
(the rest of the ``MAX_ERROR_SNIPPET_CHARS`` window follows it), so two long texts that
differ deep inside are shown where they differ, not as two identical prefixes."""

MAX_REPLAY_DRIFT_LOCATIONS: Final = 16
"""Drifted candidates a ``replay_drift`` error lists one by one (in replay order); every
further one is still counted in its totals. Keeps the error bounded on a large bundle."""

MAX_REPLAY_DRIFTS_PER_CANDIDATE: Final = 8
"""Drifted exchanges (reset, steps, final state) a replay keeps in detail per drifted
candidate for the ``replay_drift`` error's ``detail`` (the replay report); the rest are
counted (``omitted_drifts``). Eight show whether a candidate drifted once or all along."""

MAX_REPLAY_DRIFTS_KEPT: Final = 256
"""Drifted exchanges a replay keeps in detail over all candidates, in replay order; a
drifted candidate that finds this budget spent is counted (``omitted_candidates``), not
kept. With ``MAX_REPLAY_DRIFT_PATH_CHARS`` and the bounded renderings it caps the detail
at a few hundred KiB however large the bundle."""

MAX_REPLAY_DRIFT_PATH_CHARS: Final = 256
"""Characters of a drift's first differing JSON path kept (``field``); a longer path (peer
keys are unbounded) is cut and ends with ``…``."""

# --- command-line progress (kiln_verify.cli) --------------------------------------------

PROGRESS_LINE_INTERVAL_S: Final = 5.0
"""Off a terminal, a long command prints at most one progress line per this many seconds
(none at all when it finishes sooner)."""

# --- strict JSON parsing (core.jsonio) ---------------------------------------------------

MAX_JSON_DEPTH: Final = 127
"""Deepest accepted nesting of arrays/objects (the root container is depth 1).

serde_json, the parser behind Kiln, starts with a recursion budget of 128 and fails when
it reaches 0, i.e. it accepts 127 levels and rejects 128. Matching it means we accept no
document Kiln rejects and reject none it accepts. The encoder refuses the same depth.
"""

MAX_JSON_NUMBER_CHARS: Final = 256
"""Longest accepted number token (sign, digits, fraction and exponent together).

Far above any honest spelling (an i64 is 20 characters, a shortest round-trip f64 at
most 24, a full 17-digit expansion with exponent ~26) and far below Python's quadratic
``int(str)`` cost (the interpreter's own guard is 4300 digits). Strings have no separate
bound: decoding them is linear and the caller's byte cap already bounds their length.
"""

# --- hashing (core.digest) ---------------------------------------------------------------

HASH_CHUNK_BYTES: Final = 1 * MiB
"""Read size for streaming SHA-256; large enough that hashing, not syscalls, dominates."""

MAX_ARTIFACT_PATH_BYTES: Final = 512
"""Longest artifact ``relative_path`` in UTF-8 bytes (kiln-hf-trl-contract §5.2, §7)."""

MAX_BASE_SHARDS: Final = 4096
"""Most base-model weight shards in one aggregate (kiln-hf-trl-contract §7; at least 1)."""

# --- documents read from a bundle ---------------------------------------------------------

MAX_MANIFEST_BYTES: Final = 4 * MiB
"""Export/result/import manifest JSON read from a bundle (kiln-hf-trl-contract §7)."""

MAX_OPENENV_DATASET_BYTES: Final = 256 * MiB
"""``openenv.rollouts.jsonl`` (kiln-openenv-contract §5.6, §6 and collector constants)."""

MAX_OPENENV_REPLAY_BYTES: Final = 256 * MiB
"""``openenv.replay.json`` (kiln-openenv-contract §5.6, §6)."""

MAX_OPENENV_SUMMARY_BYTES: Final = 256 * MiB
"""``openenv.rollout-summary.json`` including its trailing LF (kiln-openenv-contract §6)."""

MAX_GRPO_DATASET_BYTES: Final = 64 * GiB
"""GRPO ``train.jsonl`` (kiln-hf-trl-contract §7; at least 1 byte)."""

MAX_GRPO_ROW_BYTES: Final = 256 * MiB
"""One GRPO row including its LF (kiln-hf-trl-contract §7)."""

MAX_GRPO_GROUPS: Final = 10_000_000
"""Rows (groups) in one GRPO corpus (kiln-hf-trl-contract §7; at least 1)."""

# --- HF/TRL records (kiln_verify.hf.manifest; kiln-hf-trl-contract §3.5, §4, §7) ------------

MAX_HF_TEXT_BYTES: Final = 512
"""Bounded text in HF/TRL manifests (ids, versions, config keys and texts), UTF-8 bytes."""

MAX_EFFECTIVE_CONFIG_ENTRIES: Final = 256
"""Entries of a result's ``effective_config`` (at least 1); also a ``text_list``'s items."""

MAX_EFFECTIVE_CONFIG_BYTES: Final = 64 * KiB
"""Canonical JSON of a whole ``effective_config`` map."""

MAX_GROUP_COMPLETIONS: Final = 1024
"""Completions of one GRPO group (at least 2)."""

MAX_ROLLOUT_TOKENS: Final = 16_777_216
"""``input_token_ids`` of one rollout (prompt plus completion; at least 1)."""

MAX_STOP_SEQUENCES: Final = 256
"""Stop sequences in one rollout's sampling parameters."""

MAX_STOP_BYTES: Final = 16 * KiB
"""UTF-8 bytes of all stop sequences of one rollout together."""

MAX_TEMPLATE_ITEMS: Final = 256
"""Tools, and template keyword arguments, of one template invocation (each)."""

MAX_TEMPLATE_INVOCATION_BYTES: Final = 1 * MiB
"""Canonical JSON of one rollout's ``template_invocation``."""

MAX_GENERATION_BACKEND_BYTES: Final = 64
"""A rollout's ``generation_backend`` text, UTF-8 bytes."""

MAX_KERNEL_VERSIONS: Final = 64
"""Kernel versions (at least 1), and compiled features, in execution provenance (each)."""

# --- HF/TRL export and verification (kiln_verify.hf.export, kiln_verify.hf.verify) --------

MAX_TOKENIZER_BYTES: Final = 512 * MiB
"""A model's (and a bundle's) ``tokenizer.json`` (kiln-hf-trl-contract §7, runner bound)."""

MAX_CHAT_TEMPLATE_BYTES: Final = 16 * MiB
"""One chat template, inference or training (kiln-hf-trl-contract §7)."""

MAX_MODEL_CONFIG_BYTES: Final = 4 * MiB
"""A model's ``config.json`` (a few KiB honestly; same bound as a manifest)."""

MAX_SFT_RECEIPT_BYTES: Final = 512 * MiB
"""``sft_ingestion.json`` (one hash per row; the runner's bound)."""

MAX_SFT_ROW_BYTES: Final = 256 * MiB
"""One SFT ``train.jsonl`` row including its LF (the GRPO row bound)."""

MAX_SFT_DATASET_BYTES: Final = 64 * GiB
"""An SFT messages JSONL file read by ``hf export-sft`` (the GRPO dataset bound)."""

MAX_SPLIT_MANIFEST_BYTES: Final = 4 * MiB
"""``split_manifest.json`` (a JSON object; the manifest bound)."""

MAX_ADAPTER_CONFIG_BYTES: Final = 1 * MiB
"""An input adapter's ``adapter_config.json`` / ``adapter_manifest.json`` (import cap, §7)."""

# --- HF/TRL import (kiln_verify.hf.envelope, kiln_verify.hf.importer; contract §5.8, §7) --

MAX_IMPORT_COMPRESSED_BYTES: Final = 2 * GiB
"""A ``NAME.kiln-hf-import.tar.gz`` envelope archive, as stored (Kiln's import body cap)."""

MAX_IMPORT_ENTRIES: Final = 32
"""Tar entries (files and directories) in one import envelope archive."""

MAX_IMPORT_EXPANDED_BYTES: Final = 4 * GiB
"""Sum of the ten import envelope files' sizes (and the largest one, the weights)."""

MAX_IMPORT_MANIFEST_BYTES: Final = 8 * MiB
"""``kiln_hf_export.json`` / ``kiln_hf_result.json`` in an import envelope (each)."""

MAX_IMPORT_SCRIPT_BYTES: Final = 16 * MiB
"""``executed_train.py`` in an import envelope."""

MAX_IMPORT_ARTIFACT_BYTES: Final = 512 * MiB
"""Each other identity artifact of an import envelope (model config, tokenizer, templates)."""

HTTP_IMPORT_BODY_IDLE_TIMEOUT_S: Final = 60.0
"""``POST /v1/train/hf/peft/imports/{name}``: seconds the server waits for the next body
chunk before answering ``hf_trl_import_timeout`` (408) and removing its staging."""

HTTP_IMPORT_UPLOAD_CHUNK_BYTES: Final = 256 * KiB
"""Each chunk of the import body ``hf import-peft --url`` generates and sends."""

HTTP_IMPORT_UPLOAD_QUEUE_CHUNKS: Final = 4
"""Chunks the upload may hold between the worker that archives and the connection that
sends (the body is never buffered whole)."""

HTTP_IMPORT_RESPONSE_IDLE_TIMEOUT_S: Final = 120.0
"""``hf import-peft --url``: idle read timeout on the answer (the server verifies and
installs before it answers)."""

MAX_HTTP_IMPORT_RESPONSE_BYTES: Final = 4 * MiB
"""The JSON answer (or error) ``hf import-peft --url`` reads from the import route."""

# --- OpenEnv wire (kiln-openenv-contract §8.1) ------------------------------------------

MAX_DISCOVERY_BODY_BYTES: Final = 2 * MiB
"""Each discovery or Task-API HTTP response body."""

MAX_SERVER_FRAME_BYTES: Final = 512 * KiB
"""One server-to-client WebSocket message."""

MAX_CLIENT_FRAME_BYTES: Final = 16 * MiB
"""One client-to-server WebSocket message."""

MAX_TASK_COLLECTION_ITEMS: Final = 16384
"""Items in one raw task collection returned by the Task API."""

MAX_CATALOG_NAMES: Final = 256
"""Names in one catalog list (environments, splits)."""

MAX_SELECTOR_BYTES: Final = 1024
"""Environment-name or split selector, in UTF-8 bytes (at least 1)."""

HTTP_REQUEST_TIMEOUT_S: Final = 60.0
"""Default whole-request timeout for discovery and Task-API calls."""

HTTP_CONNECT_TIMEOUT_S: Final = 10.0
"""Connect timeout for every HTTP request and WebSocket upgrade."""

MAX_BASE_URL_CHARS: Final = 2048
"""An environment base URL, in characters; far above any honest URL."""

MAX_PROTOCOL_MESSAGE_CHARS: Final = 1024
"""Characters of a server error `message` kept in a report (the frame cap bounds the rest)."""

MAX_CREDENTIAL_ENV_NAME_CHARS: Final = 128
"""Name of the environment variable that holds a bearer token (kiln-openenv-contract §8.7)."""

MAX_CREDENTIAL_TOKEN_BYTES: Final = 8192
"""A bearer token, in bytes; a bound on what goes into one header."""

MAX_ACTION_ISSUES: Final = 4
"""Issues reported for one schema-invalid action (kiln-openenv-contract §8.6)."""

MAX_POINTER_BYTES: Final = 192
"""One rendered JSON Pointer in an action issue, in UTF-8 bytes (§8.6)."""

MAX_SCHEMA_REFS: Final = 4096
"""`$ref` occurrences in one action schema; a bound on hostile schemas."""

MAX_COMPILED_ACTION_SCHEMAS: Final = 16
"""Distinct action schemas whose compiled validator a process keeps (re-inspections of an
unchanged environment reuse it instead of compiling again)."""

MAX_COMPILED_CHAT_TEMPLATES: Final = 8
"""Distinct chat templates a process keeps compiled (least recently used dropped first): an
export renders every row with the same two (the inference and the training template), so a
few cover any caller alternating models."""

MAX_ACTION_CHECK_CACHE_ENTRIES: Final = 1024
"""Distinct model actions whose schema verdict the collector remembers per environment."""

MAX_ACTION_CHECK_CACHE_KEY_CHARS: Final = 4096
"""Longest model output (characters) whose schema verdict is remembered; longer ones are
validated every time, so the cache holds at most entries x this many characters."""

KEEP_ALIVE_MIN_S: Final = 0.01
"""Lower clamp of the keep-alive `state` interval, `clamp(request_timeout / 4, ...)` (§8.5)."""

KEEP_ALIVE_MAX_S: Final = 10.0
"""Upper clamp of the keep-alive `state` interval (§8.5)."""

CAPACITY_BACKOFF_STEP_S: Final = 0.25
"""Capacity backoff per retry: `min(step x retries, max, remaining)` (§7.2)."""

CAPACITY_BACKOFF_MAX_S: Final = 2.0
"""Longest single capacity backoff (§7.2)."""

# --- OpenEnv collection (kiln-openenv-contract, "Hard limits (collector constants)") -----

MAX_ENVIRONMENTS: Final = 64
MAX_GROUPS: Final = 16384
MAX_GROUP_SIZE: Final = 256
MAX_ROLLOUTS: Final = 16384
MAX_STEPS: Final = 256
MAX_CONCURRENCY: Final = 256
MAX_ACTION_TOKENS: Final = 16384
MAX_RECOVERABLE_ERRORS: Final = 64
MAX_CAPACITY_WAIT_S: Final = 3600.0
MAX_TASK_PAGE: Final = 200
MAX_RESET_OPTIONS_FILE_BYTES: Final = 16 * MiB - 1024
MAX_RETAINED_BYTES: Final = 512 * MiB - 1 * MiB
"""Budget for reset data, actions, observations, errors and final states kept in memory."""
MAX_EXECUTOR_WORKERS: Final = 256
"""Group ranges ``openenv rollout --executor ray --workers N`` splits a plan into."""
MAX_EXECUTOR_RETRIES: Final = 8
"""Times ``--ray-retries`` lets a range whose Ray worker died be collected again."""

# --- bundle records (kiln_verify.openenv.records) -----------------------------------------

MAX_RECORD_TEXT_BYTES: Final = 256
"""UTF-8 bytes of one identity text in a record (environment name, behaviour-policy fields,
OpenEnv error code, ``openapi_version``): Kiln's provenance rule (contract §2.11, §3.2)."""

MAX_RECORD_URL_BYTES: Final = 2048
"""UTF-8 bytes of ``environment_base_url`` in rollout provenance (contract §3.2)."""

MAX_RECORD_ERROR_PATH_CHARS: Final = 160
"""Characters of the JSON path an invalid-record error names (deep paths are cut)."""

# --- policies (kiln_verify.openenv.policy) -----------------------------------------------

MAX_POLICY_RESPONSE_BYTES: Final = 16 * MiB
"""One chat-completions response body (kiln-openenv-contract §5.4 and §11: Kiln responses
are capped at 16 MiB); counted while streaming, before anything is parsed."""

HTTP_CHAT_TIMEOUT_S: Final = 180.0
"""Whole-request timeout of one chat-completions call (kiln-openenv-contract §5.4, §11)."""

DEFAULT_POLICY_RETRIES: Final = 2
"""Extra attempts of one chat-completions call after a 429, a 5xx or a refused connection
(the OpenAI Python client's own default); ``--policy-option max_retries=N`` changes it."""

MAX_POLICY_RETRIES: Final = 10
"""The largest ``max_retries`` the openai policy accepts."""

POLICY_RETRY_BACKOFF_S: Final = 0.5
"""First wait before a retry; it doubles per attempt up to ``POLICY_RETRY_BACKOFF_MAX_S``."""

POLICY_RETRY_BACKOFF_MAX_S: Final = 8.0
"""Longest wait between two attempts when the server gives no ``Retry-After``."""

POLICY_RETRY_AFTER_MAX_S: Final = 30.0
"""Longest ``Retry-After`` (integer seconds) that is honoured; a longer one fails at once."""

MAX_POLICY_ERROR_BODY_BYTES: Final = 64 * KiB
"""Bytes of a non-2xx chat-completions body read for the server's own reason (its JSON
``detail`` or ``error.message``, or its text); the rest is never read. A FastAPI validation
list or an error page fits with room to spare, and a huge body costs nothing more."""

HTTP_POLICY_ERROR_BODY_TIMEOUT_S: Final = 5.0
"""How long the openai policy waits for that error body once the status has arrived; a
server that sends a status and then stalls still gets its status reported, promptly."""

MAX_PEER_REASON_CHARS: Final = 240
"""Characters of a policy server's own reason that an error quotes (control characters
escaped, credentials scrubbed). Wider than ``MAX_ERROR_SNIPPET_CHARS``: a server's sentence
("The prompt has 1248 tokens, but the model takes at most 512, prompt and answer ...") is
the whole point of the message, and three 80-column lines hold it."""

MAX_SECRET_SPELLING_LAYERS: Final = 3
"""Layers of encoding (JSON or Python backslash escapes, percent-encoding, in any order) a
peer text about to be quoted is decoded through when looking for a credential in it; a
reader undoes one or two by eye, and each layer reads every text of the one before four ways
(every escape, JSON's alone, Python's hex escapes alone, percent-encoding) on a bounded text."""

MAX_POLICY_SCRIPT_BYTES: Final = 16 * MiB
"""A scripted policy's JSON script file."""

MAX_POLICY_OPTIONS: Final = 64
"""``--policy-option KEY=VALUE`` pairs accepted for one policy."""

MAX_POLICY_OPTION_BYTES: Final = 4096
"""One ``--policy-option`` key or value, in UTF-8 bytes."""

MAX_MODEL_FILE_BYTES: Final = 64 * GiB
"""One file of a local model directory hashed for the behaviour-policy identity."""

MAX_MODEL_FILES: Final = 4096
"""Regular files in a local model directory hashed for the behaviour-policy identity."""

# --- safetensors headers and PEFT adapters (kiln_verify.core.safetensors_header,
# kiln_verify.hf.adapter_check; kiln-hf-trl-contract §5.8, §7) ----------------------------

MAX_SAFETENSORS_HEADER_BYTES: Final = 16 * MiB
"""A safetensors JSON header (the length prefix's value; it must also lie within the file)."""

MAX_LORA_RANK: Final = 65536
"""Largest accepted LoRA ``r``. Kiln only requires ``r > 0``; this bound is far above any
real adapter (ranks are ≤ a projection's width) and keeps shape arithmetic small."""

MAX_TRAINER_SEED: Final = 2**32 - 1
"""Largest ``GrpoConfig.seed`` the recorded-GRPO runner takes (``train.py --seed``; torch's
and NumPy's seeds are 32-bit); a larger Kiln seed is refused at training admission."""

# --- archives (kiln_verify.core.safe_tar; kiln-hf-trl-contract §1.3, §5.8, §7) -----------

MAX_ARCHIVE_COMPRESSED_BYTES: Final = 64 * GiB
"""A ``.tar.gz`` read for extraction, as stored (CLI download cap, §1.3 and §7)."""

MAX_ARCHIVE_ENTRIES: Final = 4096
"""Tar entries (files and directories) in one archive (CLI download cap, §1.3 and §7)."""

MAX_ARCHIVE_EXPANDED_BYTES: Final = 64 * GiB
"""Sum of the declared sizes of an archive's regular files (CLI download cap, §7)."""

MAX_ARCHIVE_MEMBER_BYTES: Final = 64 * GiB
"""One regular file in an archive: the largest bundle file, ``train.jsonl`` (§7)."""

MAX_ARCHIVE_NAME_BYTES: Final = 256
"""A member name including its root, in UTF-8 bytes: the most a USTAR header can hold
(155-byte prefix, ``/``, 100-byte name)."""

MAX_COMMIT_JOURNAL_BYTES: Final = 4 * MiB
"""The journal of a multi-target publication (a bundle's files, an HF export's directory
and archive): every entry's identity, a bundle's tree included (kiln_verify.core.publisher)."""

MAX_ARCHIVE_TAIL_BYTES: Final = 10 * KiB
"""Zero bytes allowed after the tar end-of-archive marker (Kiln's import rule, §5.8, §7);
a tar writer pads to 10240-byte records, so an honest tail is shorter."""

# --- the control plane (kiln_verify.control, kiln_verify.server; contract §10-§12) --------

MAX_CONTROL_REQUEST_BYTES: Final = 1 * MiB
"""A control-plane request body (every ``POST`` route) and the ``openenv start --request``
file (kiln-openenv-contract §11, §12: "body limit 1 MiB", "run request file 1 MiB")."""

MAX_CONTROL_RESPONSE_BYTES: Final = 16 * MiB
"""A JSON response the control client reads from a server (§11: "Kiln responses 16 MiB")."""

MAX_RUN_STATUS_BYTES: Final = 2 * MiB
"""One persisted ``run.json`` (§12); a larger one is never written and never restored."""

MAX_FAILURE_MESSAGE_BYTES: Final = 4 * KiB
"""``kiln.openenv-run-failure.v1`` ``message`` in UTF-8 bytes; longer text is cut at a
character boundary and ends in ``...`` (§10)."""

MAX_FAILURE_HINT_BYTES: Final = 1 * KiB
"""A failure ``hint``: ours are one sentence; a record read back may not carry more."""

MAX_IDEMPOTENCY_KEY_BYTES: Final = 128
"""``idempotency_key``: 1..128 ASCII bytes of ``[A-Za-z0-9._:-]`` (§12 and the seed)."""

MAX_CREDENTIAL_HANDLE_CHARS: Final = 64
"""A server credential handle (``credential_ids`` entry): 1..64 of ``[A-Za-z0-9_-]``."""

MAX_SERVER_CONFIG_BYTES: Final = 1 * MiB
"""The ``kiln-verify serve --config`` TOML file, refused from metadata before reading."""

MAX_SERVER_ACTIVE_RUNS: Final = 256
"""Largest accepted ``[openenv] max_active_runs`` (each active run may hold sessions and a
policy; the collector's own concurrency bound is 256 as well)."""

MAX_SERVER_TRACKED_RUNS: Final = 65536
"""Largest accepted ``[openenv] max_tracked_runs`` (every tracked status stays in memory)."""

MAX_SERVER_TTL_S: Final = 10 * 365 * 24 * 3600
"""Largest accepted ``[openenv] tracked_run_ttl_secs`` (ten years)."""

MAX_SERVER_CREDENTIALS: Final = 256
"""``[openenv.credentials.<id>]`` tables in one server configuration."""

MAX_SERVER_POLICIES: Final = 64
"""``[policies.<adapter>]`` tables in one server configuration."""

MAX_SERVER_ADAPTERS: Final = 1024
"""Adapters one server's state directory holds (``<state>/adapters/<name>/``): an install
beyond it is refused (``adapter_registry_full``) and ``GET /v1/adapters`` lists at most this
many, by name."""

MAX_ADAPTER_NAME_CHARS: Final = 128
"""An installed adapter's name: 1..128 ASCII characters (Kiln's ``ImportAdapterName``)."""

MAX_CANCEL_WAIT_S: Final = 10.0
"""How long ``DELETE /v1/openenv/runs/<id>`` waits for an active run to stop before it
answers with the still-stopping status (cancellation stays cooperative)."""

# --- reports (kiln_verify.report; docs/reports.md) ---------------------------------------

REPORT_HISTOGRAM_BINS: Final = 10
"""Equal-width bins of a return histogram (and of the non-zero group spreads): enough to
show a distribution's shape, few enough that every bin's count stays readable."""

REPORT_TOP_ERROR_CODES: Final = 10
"""Harness and protocol error codes listed per report, most frequent first."""

REPORT_EXCERPT_CHARS: Final = 2000
"""Characters of one peer-supplied text (an observation, an action, an error message, a
failure's evidence) a report quotes; longer text is cut and says how much was left out."""

REPORT_EXAMPLE_SEGMENTS: Final = 12
"""Trajectory segments shown of one example episode (the rest are counted, not shown)."""

REPORT_CHART_LABELLED_BARS: Final = 40
"""Up to this many bars a chart writes each bar's value and category under it; beyond,
the values are in the chart's table (always) and in each bar's tooltip."""

REPORT_MAX_CONFORMANCE_BYTES: Final = 64 * MiB
"""A conformance report JSON read by ``openenv report --conformance``: 47 cases and a
``collectable`` verdict on every one of hundreds of endpoints fits in a few MiB; the bound
only refuses a file that could not be a report."""

REPORT_ZERO_VARIANCE_WARN_FRACTION: Final = 0.5
"""A bundle report warns when more than this fraction of its groups have no reward
variance (every candidate scored the same: GRPO's group-relative advantage is zero, so
such a group trains nothing)."""

REPORT_MAX_RECEIPT_BYTES: Final = 1 * MiB
"""An evaluation receipt read by ``openenv report --receipt`` (ours are about 2 KiB)."""

REPORT_MAX_REPLAY_BYTES: Final = 4 * MiB
"""A saved ``openenv replay --json`` document read by ``openenv report --replay-run``: the
drift detail is bounded by ``MAX_REPLAY_DRIFTS_KEPT`` (about 1 KiB each at most), so
anything larger could not be one."""

# --- online GRPO in TRL (kiln_verify.trl, docs/trl.md) ----------------------------------

MAX_TRL_TOOL_PARAMETERS: Final = 64
"""Properties of an action schema exposed as one tool signature (each becomes a keyword
parameter and a line of the tool's docstring)."""

TRL_RANK_SEED_STRIDE: Final = 2**32
"""Seeds of rank ``r`` start at ``seed_start + r * TRL_RANK_SEED_STRIDE``, so the ranks of a
multi-GPU run never share a group seed (docs/trl.md, "The seed rule")."""

TRL_EPISODE_TIMEOUT_S: Final = 3600.0
"""One reset, step, state or close of a TRL episode waits at most this long for the
environment thread (the client's own request timeouts are much shorter)."""

# --- the training chain's evidence (kiln_verify.openenv.training, docs/training-chain.md) -

MAX_TRAINING_EVIDENCE_BYTES: Final = 4 * MiB
"""Each of ``train_receipt.json`` and ``adapter_manifest.json``: a regular, non-symlink file
of at most this many bytes (the seed's 4 MiB bound on the run's retained trainer evidence)."""

MAX_ADAPTER_MANIFEST_FILES: Final = 64
"""Files one adapter manifest lists (a PEFT adapter directory holds a handful)."""

MAX_ADAPTER_FILE_BYTES: Final = 4 * GiB
"""Each adapter file an adapter manifest lists and the chain check hashes."""

# --- the HF/TRL export registry over HTTP (docs/hf-http-export.md; hf-trl-contract §1.3, §7) -

MAX_HF_EXPORTS: Final = 256
"""Published exports one server's registry retains; creating one more is
``hf_trl_export_capacity`` (503) until one is deleted."""

MAX_HF_EXPORT_REQUEST_BYTES: Final = 256 * MiB
"""An inline ``POST /v1/train/hf/{sft,grpo}/exports`` body; larger corpora go by
``dataset_path``."""

HTTP_EXPORT_STREAM_CHUNKS: Final = 4
"""Archive chunks of ``HASH_CHUNK_BYTES`` a download may hold between the worker that
compresses and the connection that sends (the stream is never buffered whole)."""

HTTP_EXPORT_IDLE_TIMEOUT_S: Final = 120.0
"""The CLI's idle read timeout on every export request and the download body."""

MAX_HF_EXPORT_RESPONSE_BYTES: Final = 4 * MiB
"""A JSON answer the CLI reads from the export routes (create, list, delete, errors)."""
