"""Kiln's published field lists for every record we write under a Kiln schema name.

Hand-written from Kiln's own contracts, not copied: for each record, the property names
its schema allows, the ones it requires, whether it is closed (``additionalProperties:
false``) and which properties hold another listed record. Read from ericflo/kiln:

- ``contracts/kiln-openenv-v1.schema.json`` and ``contracts/kiln-control-plane-v1.schema.json``
  at commit 7b449586b9daf45128768ae5466787ac585f53b2, the newest revision found
  (``kiln.openenv-rollout-summary.v5`` with ``thinking_budget_tokens`` and
  ``training_selection``; ``kiln.openenv-run.v5`` / ``kiln.openenv-run-list.v5``). The
  other stored control-plane revision, f4922d28a9a05836304f2a8610684a09d6d04ab5, is older:
  a strict subset of this one (run status v1..v4 and ``kiln.openenv-run-list.v4``, no
  preflight, ``training_contract``, ``failure``, ``rollout_stats``, ``warnings``,
  ``training.training_data``, evaluation ``baseline_stats``/``candidate_stats``,
  ``train_receipt``/``adapter_manifest`` artifact kinds or ``revalidating`` state);
- ``contracts/kiln-inference-v1.schema.json`` at 0072a9638671a856d7f8ebb88d948c7a02cc78af
  (the behaviour-policy identity and ``kiln.rollout-provenance.v1``);
- ``contracts/kiln-artifacts-v1.schema.json`` at 40b8a45e3cbc5a919205d174949703873dc3f2ce
  (the HF/TRL export manifest and its parts).

Kiln publishes no JSON Schema for the HF/TRL result manifest, the import receipt, the SFT
ingestion receipt, the base-weight shard manifest or the execution provenance (the last two
live in the 300 KB observability schema, which was not read): their entries (marked
``RUST``) are the fields of Kiln's Rust types (``crates/kiln-train/src/hf_interop.rs``,
``sft_ingestion.rs``, ``kiln-core``'s execution provenance), as the reference notes
record them. docs/contract.md, "Kiln's published schemas", lists every departure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

KILN_COMMIT: Final = "7b449586b9daf45128768ae5466787ac585f53b2"


@dataclass(frozen=True)
class Kiln:
    """One Kiln record: allowed and required property names, closed or not, children."""

    allowed: frozenset[str]
    required: frozenset[str]
    closed: bool = True
    children: dict[str, str] = field(default_factory=dict)
    """property -> the listed record it holds (an object, or each item of an array)."""
    source: str = "schema"
    enums: dict[str, str] = field(default_factory=dict)
    """property -> the :data:`KILN_ENUMS` list its value is one of."""


def _k(
    allowed: str,
    optional: str = "",
    *,
    closed: bool = True,
    children: dict[str, str] | None = None,
    source: str = "schema",
    enums: dict[str, str] | None = None,
) -> Kiln:
    """``allowed`` lists every property; ``optional`` the ones not required."""
    names = frozenset(allowed.split())
    loose = frozenset(optional.split())
    assert loose <= names, loose - names
    assert set(enums or {}) <= names
    return Kiln(names, names - loose, closed, children or {}, source, enums or {})


def _e(values: str) -> tuple[str, ...]:
    return tuple(values.split())


KILN_ENUMS: Final[dict[str, tuple[str, ...]]] = {
    # --- kiln-control-plane-v1.schema.json @7b449586, in Kiln's order ---------------------
    "OpenEnvRunKind": _e("rollout train"),
    "OpenEnvRunState": _e(
        "queued discovering collecting revalidating submitting rollout_ready training_queued "
        "training_running post_evaluating environment_evaluating completed failed cancelled"
    ),
    "OpenEnvRunFailureCode": _e(
        "run_admission_failed run_interrupted persisted_contract_invalid environment_unavailable "
        "environment_capacity_exhausted environment_protocol_error environment_identity_changed "
        "collection_failed artifact_publication_failed training_submission_failed "
        "training_failed training_evidence_invalid post_evaluation_failed "
        "environment_evaluation_failed internal_error"
    ),
    "OpenEnvRunFailureStage": _e(
        "restoration admission discovery collection identity_verification artifact_publication "
        "training_submission training post_evaluation environment_evaluation orchestration"
    ),
    "OpenEnvArtifact.kind": _e(
        "dataset replay summary train_receipt adapter_manifest "
        "environment_eval_baseline_dataset environment_eval_baseline_replay "
        "environment_eval_baseline_summary environment_eval_candidate_dataset "
        "environment_eval_candidate_replay environment_eval_candidate_summary "
        "environment_eval_receipt"
    ),
    "TrainingState": _e("queued running completed failed"),
    "OpenEnvTrainingStatus.gate_outcome": _e("promoted kept regression demoted inconclusive error"),
    "OpenEnvEnvironmentEvalState": _e(
        "pending collecting_baseline collecting_candidate completed failed cancelled"
    ),
    "OpenEnvEnvironmentEvalOutcome": _e("diagnostic promoted kept rejected inconclusive error"),
    "OpenEnvEnvironmentEvalDecision": _e("diagnostic passed rejected inconclusive"),
}
"""Kiln's closed value lists for the properties of the records we write that have one."""


_IDENTITY = (
    "schema client_profile base_url websocket_url authentication openapi_version environments "
    "metadata schema_sha256 discovery_sha256"
)
_METADATA = "name description readme_content version author documentation_url"
_STATS = (
    "mean_episode_return min_episode_return max_episode_return done_count max_steps_count "
    "invalid_model_action_count protocol_error_count recoverable_protocol_error_count "
    "capacity_retry_count total_environment_steps total_model_tokens mean_model_latency_ms"
)
_REQUEST = (
    "kind idempotency_key environment_urls credential_ids adapter groups group_size seed_start "
    "reset_options environment_reset_options max_steps concurrency max_action_tokens "
    "thinking_budget_tokens temperature thinking protocol_error_reward max_recoverable_errors "
    "capacity_wait_seconds output_adapter training_config auto_load post_eval environment_eval"
)

_GRPO_CONFIG = (
    "learning_rate kl_coeff clip_epsilon clip_eps_high cispo_max_weight advantage_mode "
    "loss_aggregation kl_estimator dynamic_sampling is_level behavior_policy "
    "kl_reference_policy reference_policy entropy_aware_kl_quantile "
    "reward_saturation_threshold reward_low_variance_threshold reward_filter_var_min "
    "reward_filter_var_max reward_filter_min_groups reward_filter_on_empty lora_rank "
    "lora_alpha base_adapter allow_adapter_shape_conversion allow_high_lora_scale "
    "output_name auto_load checkpoint_interval resume_checkpoint grad_checkpoint_segments "
    "detect_anomaly seed optimizer adapter_smoke_test adapter_smoke_prompts "
    "shared_prefix_reference loss"
)
"""``GrpoConfig``: open, nothing required (``reference_policy`` is an input alias)."""

KILN: Final[dict[str, Kiln]] = {
    # --- kiln-openenv-v1.schema.json @7b449586 ------------------------------------------
    "OpenEnvRolloutSummary": _k(
        "schema kiln_url adapter adapter_label behavior_policy environments groups group_size "
        "rollout_count seed_start max_steps concurrency max_action_tokens thinking_budget_tokens "
        "temperature thinking protocol_error_reward max_recoverable_errors capacity_wait_seconds "
        "reset_plan_sha256 output_path replay_output_path summary_output_path dataset_sha256 "
        "dataset_bytes replay_sha256 replay_bytes stats rollouts training_selection "
        "training_contract training_submission",
        "thinking_budget_tokens training_selection training_contract training_submission",
        children={
            "behavior_policy": "RolloutBehaviorPolicyIdentityV1",
            "environments": "EnvironmentInspection",
            "stats": "RolloutStats",
            "rollouts": "RolloutRecord",
            "training_selection": "OpenEnvTrainingSelection",
            "training_contract": "OpenEnvTrainingContract",
        },
    ),
    "EnvironmentInspection": _k(
        "identity schema",
        children={"identity": "EnvironmentIdentity", "schema": "EnvironmentSchema"},
    ),
    "EnvironmentIdentity": _k(
        _IDENTITY, "authentication discovery_sha256", children={"metadata": "Metadata"}
    ),
    "Metadata": _k(_METADATA, "readme_content version author documentation_url", closed=False),
    "EnvironmentSchema": _k("action observation state"),
    "Observation": _k("observation reward done metadata", "metadata"),
    "ProtocolError": _k(
        "code message errors active_sessions max_sessions factory_name",
        "errors active_sessions max_sessions factory_name",
    ),
    "RolloutRecord": _k(
        "group_index candidate_index environment_name environment_url seed steps episode_return "
        "terminal_done termination protocol_error_code recoverable_protocol_errors "
        "capacity_retries model_tokens model_latency_ms",
        "protocol_error_code",
    ),
    "RolloutStats": _k(_STATS),
    "OpenEnvTrainingSelection": _k(
        "groups_submitted rollouts_submitted no_output_rollouts_discarded "
        "no_usable_output_groups_skipped no_reward_gradient_groups_skipped warnings",
        "warnings",
    ),
    "OpenEnvReplayManifest": _k(
        "schema client_profile dataset_sha256 protocol_error_reward max_steps environments groups",
        children={"environments": "EnvironmentInspection", "groups": "ReplayGroup"},
    ),
    "ReplayGroup": _k(
        "group_index environment_index seed reset_payload reset_observation candidates",
        children={"reset_observation": "Observation", "candidates": "ReplayCandidate"},
    ),
    "ReplayCandidate": _k(
        "candidate_index exchanges final_state episode_return terminal_done termination "
        "recoverable_protocol_errors capacity_retries model_tokens model_latency_ms",
        "final_state",
        children={"exchanges": "ReplayExchange"},
    ),
    "ReplayExchange": _k(
        "step_index action result", children={"result": "ReplayExchangeResult.kind"}
    ),
    # ReplayExchangeResult is a oneOf, told apart by `kind`
    "ReplayExchangeResult.observation": _k(
        "kind observation", children={"observation": "Observation"}
    ),
    "ReplayExchangeResult.protocol_error": _k(
        "kind error continued", children={"error": "ProtocolError"}
    ),
    "VerificationReport": _k(
        "schema summary_path dataset_path replay_path dataset_sha256 replay_sha256 groups "
        "rollouts environment_exchanges"
    ),
    "ReplayRunReport": _k(
        "schema replay_sha256 environments groups rollouts environment_exchanges "
        "capacity_retries environment_prefix_only_rollouts"
    ),
    "EnvironmentEvaluationReceipt": _k(
        "schema run_id config seed_start baseline candidate baseline_summary_sha256 "
        "candidate_summary_sha256 evidence outcome verdict",
        children={
            "config": "EnvironmentEvalConfig",
            "baseline": "PolicyIdentity",
            "candidate": "PolicyIdentity",
            "evidence": "EnvironmentEvalEvidence",
        },
    ),
    "EnvironmentEvalConfig": _k(
        "groups group_size seed_start gate",
        "seed_start gate",
        children={"gate": "EnvironmentEvalGate"},
    ),
    "EnvironmentEvalGate": _k("min_mean_return min_mean_improvement", "min_mean_return"),
    "PolicyIdentity": _k(
        "adapter adapter_content_revision execution_provenance_sha256",
        "adapter adapter_content_revision execution_provenance_sha256",
    ),
    "EnvironmentEvalEvidence": _k(
        "policy_version paired_groups paired_episodes minimum_paired_groups baseline_mean_return "
        "candidate_mean_return mean_return_improvement improved_groups regressed_groups "
        "tied_groups exact_sign_test_p_value exact_sign_test_alpha decision reason"
    ),
    "OpenEnvArtifactDownloadReceipt": _k("schema run_id kind source_url output_path sha256 bytes"),
    # --- kiln-inference-v1.schema.json @0072a963 ----------------------------------------
    "RolloutBehaviorPolicyIdentityV1": _k(
        "served_model_id base_model_sha256 adapter inference_config_sha256 implementation",
        "adapter",
        children={"adapter": "RolloutAdapterIdentityV1"},
    ),
    "RolloutAdapterIdentityV1": _k("name content_sha256"),
    "RolloutProvenanceV1": _k(
        "schema input_token_ids prompt_token_count prompt_messages_sha256 scored_payload_sha256 "
        "action_tokens behavior_policy tokenizer template_invocation sampling seed "
        "generation_backend",
        "template_invocation",
        children={
            "action_tokens": "RolloutActionTokenV1",
            "behavior_policy": "RolloutBehaviorPolicyIdentityV1",
            "tokenizer": "RolloutTokenizerIdentityV1",
            "template_invocation": "RolloutChatTemplateInvocationV1",
            "sampling": "RolloutSamplingConfigV1",
        },
    ),
    "RolloutActionTokenV1": _k("sequence_index token_id source behavior_logprob"),
    "RolloutTokenizerIdentityV1": _k("vocab_sha256 config_sha256 chat_template_sha256"),
    "RolloutChatTemplateInvocationV1": _k(
        "tools tool_choice template_kwargs", "tools tool_choice template_kwargs"
    ),
    "RolloutSamplingConfigV1": _k(
        "temperature top_p top_k min_p max_tokens repetition_penalty presence_penalty "
        "frequency_penalty stop thinking_budget",
        "thinking_budget",
        children={"thinking_budget": "RolloutThinkingBudgetV1"},
    ),
    "RolloutThinkingBudgetV1": _k(
        "max_tokens max_time_ms close_token_ids", "max_tokens max_time_ms"
    ),
    # --- kiln-control-plane-v1.schema.json @7b449586 ------------------------------------
    "OpenEnvRolloutProvenanceV1": _k(
        "schema environment_name environment_base_url openapi_version discovery_sha256 "
        "environment_schema_sha256 action_schema_sha256 behavior_policy reset_sha256 seed steps "
        "episode_return terminal_done termination protocol_error_code",
        "openapi_version discovery_sha256 behavior_policy protocol_error_code",
        children={"behavior_policy": "RolloutBehaviorPolicyIdentityV1"},
    ),
    "OpenEnvTrainingContract": _k(
        "schema effective_config post_eval behavior_policy",
        "post_eval behavior_policy",
        children={
            "effective_config": "GrpoConfig",
            "behavior_policy": "RolloutBehaviorPolicyIdentityV1",
        },
    ),
    "GrpoConfig": _k(_GRPO_CONFIG, _GRPO_CONFIG, closed=False),
    "OpenEnvTrainingPreflightRequest": _k(
        "adapter output_adapter training_config auto_load post_eval",
        "adapter training_config auto_load post_eval",
        children={"training_config": "GrpoConfig"},
    ),
    "OpenEnvTrainingPreflightReceipt": _k(
        "schema effective_config post_eval behavior_policy capacity capacity_reserved",
        "post_eval",
        children={
            "effective_config": "GrpoConfig",
            "behavior_policy": "RolloutBehaviorPolicyIdentityV1",
            "capacity": "OpenEnvTrainingCapacitySnapshot",
        },
    ),
    "OpenEnvTrainingCapacitySnapshot": _k(
        "checked_unix_ms queued_jobs max_queued_jobs tracked_jobs max_tracked_jobs"
    ),
    "OpenEnvRunStatus": _k(
        "schema run_id kind state request submitted_unix_ms admission finished_unix_ms progress "
        "rollout_stats environments artifacts training_job_id training_contract "
        "training_submission training post_evaluations warnings environment_evaluation failure "
        "error",
        "admission finished_unix_ms rollout_stats environments artifacts training_job_id "
        "training_contract training_submission training post_evaluations warnings "
        "environment_evaluation failure error",
        children={
            "request": "OpenEnvRunRequest",
            "admission": "OpenEnvRunAdmission",
            "progress": "OpenEnvRunProgress",
            "rollout_stats": "OpenEnvRolloutStats",
            "environments": "OpenEnvIdentity",
            "artifacts": "OpenEnvArtifact",
            "training_contract": "OpenEnvTrainingContract",
            "training": "OpenEnvTrainingStatus",
            "environment_evaluation": "OpenEnvEnvironmentEvalStatus",
            "failure": "OpenEnvRunFailure",
        },
        enums={"kind": "OpenEnvRunKind", "state": "OpenEnvRunState"},
    ),
    "OpenEnvTrainingStatus": _k(
        "job_id state progress current_loss epoch adapter_path training_data "
        "linked_eval_job_ids post_eval_verdict gate_outcome error",
        "current_loss epoch adapter_path training_data linked_eval_job_ids post_eval_verdict "
        "gate_outcome error",
        children={"training_data": "TrainingDataProvenance"},
        enums={"state": "TrainingState", "gate_outcome": "OpenEnvTrainingStatus.gate_outcome"},
    ),
    "TrainingDataProvenance": _k(
        "source dataset split dataset_corpus_sha256 split_manifest_sha256 "
        "admitted_corpus_sha256 rows openenv",
        "dataset split dataset_corpus_sha256 split_manifest_sha256 openenv",
        children={"openenv": "OpenEnvTrainingDataProvenanceV1"},
    ),
    "OpenEnvTrainingDataProvenanceV1": _k(
        "schema groups rollouts unique_seeds seed_min seed_max total_steps terminations "
        "group_plan_sha256 behavior_policy environments",
        "behavior_policy",
        children={
            "terminations": "OpenEnvTerminationCountsV1",
            "behavior_policy": "RolloutBehaviorPolicyIdentityV1",
            "environments": "OpenEnvTrainingEnvironmentV1",
        },
    ),
    "OpenEnvTrainingEnvironmentV1": _k(
        "environment_name environment_base_url openapi_version discovery_sha256 "
        "environment_schema_sha256 action_schema_sha256 groups rollouts total_steps terminations",
        "openapi_version discovery_sha256",
        children={"terminations": "OpenEnvTerminationCountsV1"},
    ),
    "OpenEnvTerminationCountsV1": _k("done max_steps invalid_model_action protocol_error"),
    "OpenEnvEnvironmentEvalStatus": _k(
        "state seed_start groups group_size baseline candidate progress baseline_stats "
        "candidate_stats evidence outcome verdict",
        "baseline_stats candidate_stats evidence outcome verdict",
        children={
            "baseline": "OpenEnvPolicyIdentity",
            "candidate": "OpenEnvPolicyIdentity",
            "progress": "OpenEnvEnvironmentEvalProgress",
            "baseline_stats": "OpenEnvRolloutStats",
            "candidate_stats": "OpenEnvRolloutStats",
            "evidence": "OpenEnvEnvironmentEvalEvidence",
        },
        enums={"state": "OpenEnvEnvironmentEvalState", "outcome": "OpenEnvEnvironmentEvalOutcome"},
    ),
    "OpenEnvEnvironmentEvalProgress": _k(
        "state groups_completed groups_total rollouts_completed rollouts_total",
        enums={"state": "OpenEnvEnvironmentEvalState"},
    ),
    "OpenEnvPolicyIdentity": _k(
        "adapter adapter_content_revision execution_provenance_sha256",
        "adapter adapter_content_revision execution_provenance_sha256",
    ),
    "OpenEnvEnvironmentEvalEvidence": _k(
        "policy_version paired_groups paired_episodes minimum_paired_groups baseline_mean_return "
        "candidate_mean_return mean_return_improvement improved_groups regressed_groups "
        "tied_groups exact_sign_test_p_value exact_sign_test_alpha decision reason",
        enums={"decision": "OpenEnvEnvironmentEvalDecision"},
    ),
    "OpenEnvRunList": _k("schema runs", children={"runs": "OpenEnvRunStatus"}),
    "OpenEnvRunRequest": _k(
        _REQUEST,
        " ".join(name for name in _REQUEST.split() if name != "environment_urls"),
        children={"environment_eval": "OpenEnvEnvironmentEvalConfig"},
    ),
    "OpenEnvEnvironmentEvalConfig": _k(
        "groups group_size seed_start gate",
        "groups group_size seed_start gate",
        children={"gate": "OpenEnvEnvironmentEvalGate"},
    ),
    "OpenEnvEnvironmentEvalGate": _k(
        "min_mean_return min_mean_improvement", "min_mean_return min_mean_improvement"
    ),
    "OpenEnvRunAdmission": _k(
        "max_active_runs sequence queue_position admitted_unix_ms queue_wait_ms",
        "queue_position admitted_unix_ms queue_wait_ms",
    ),
    "OpenEnvRunProgress": _k("groups_completed groups_total rollouts_completed rollouts_total"),
    "OpenEnvRolloutStats": _k(_STATS, "min_episode_return max_episode_return"),
    "OpenEnvIdentity": _k(
        _IDENTITY,
        "authentication openapi_version discovery_sha256",
        children={"metadata": "OpenEnvMetadata"},
    ),
    "OpenEnvMetadata": _k(_METADATA, "readme_content version author documentation_url"),
    "OpenEnvArtifact": _k("kind url sha256 bytes", enums={"kind": "OpenEnvArtifact.kind"}),
    "OpenEnvRunFailure": _k(
        "schema code stage retryable message hint occurred_unix_ms protocol_code http_status",
        "protocol_code http_status",
        enums={"code": "OpenEnvRunFailureCode", "stage": "OpenEnvRunFailureStage"},
    ),
    "OpenEnvInspectResponse": _k(
        "schema environments", children={"environments": "OpenEnvInspection"}
    ),
    "OpenEnvInspection": _k(
        "identity schema", children={"identity": "OpenEnvIdentity", "schema": "OpenEnvSchema"}
    ),
    "OpenEnvSchema": _k("action observation state"),
    "OpenEnvTaskCatalogResponse": _k(
        "schema catalogs", children={"catalogs": "OpenEnvTaskCatalogEntry"}
    ),
    "OpenEnvTaskCatalogEntry": _k("base_url catalog", children={"catalog": "OpenEnvTaskCatalog"}),
    "OpenEnvTaskCatalog": _k(
        "environment_name task_api splits selected_split num_tasks start stop tasks",
        "selected_split num_tasks start stop tasks",
        children={"splits": "OpenEnvTaskSplit"},
    ),
    "OpenEnvTaskSplit": _k("name type", closed=False),
    # --- kiln-artifacts-v1.schema.json @40b8a45e -----------------------------------------
    "HfTrlExportManifestV1": _k(
        "schema_version manifest_type task source_execution_provenance model data "
        "reference_script environment_lock input_adapter export_sha256",
        "input_adapter",
        children={
            "source_execution_provenance": "ExecutionProvenanceV1",
            "model": "HfTrlModelIdentity",
            "data": "HfTrlDataExport",
            "reference_script": "HfTrlFileIdentity",
            "environment_lock": "HfTrlFileIdentity",
            "input_adapter": "HfTrlInputAdapter",
        },
    ),
    "HfTrlModelIdentity": _k(
        "served_model_id base_weight_shard_manifest tokenizer_vocab_sha256 model_config "
        "tokenizer chat_template native_training_chat_template trl_training_chat_template",
        children={
            "base_weight_shard_manifest": "BaseWeightShardManifest",
            "model_config": "HfTrlFileIdentity",
            "tokenizer": "HfTrlFileIdentity",
            "chat_template": "HfTrlFileIdentity",
            "native_training_chat_template": "HfTrlFileIdentity",
            "trl_training_chat_template": "HfTrlFileIdentity",
        },
    ),
    "HfTrlDataExport": _k(
        "source_name format row_count ordered_corpus_sha256 dataset sft_selection "
        "rollout_provenance_schema split_manifest",
        "sft_selection rollout_provenance_schema split_manifest",
        children={
            "dataset": "HfTrlFileIdentity",
            "sft_selection": "HfTrlSftSelection",
            "split_manifest": "HfTrlFileIdentity",
        },
    ),
    "HfTrlSftSelection": _k(
        "invalid_row_policy label_policy rows_read rows_kept rows_rejected kept_corpus_sha256 "
        "ingestion_receipt",
        children={"ingestion_receipt": "HfTrlFileIdentity"},
    ),
    "HfTrlInputAdapter": _k(
        "name config model kiln_manifest",
        "kiln_manifest",
        children={
            "config": "HfTrlFileIdentity",
            "model": "HfTrlFileIdentity",
            "kiln_manifest": "HfTrlFileIdentity",
        },
    ),
    "HfTrlFileIdentity": _k("relative_path size_bytes sha256"),
    # the export registry's answers (same schema, @40b8a45e; docs/hf-http-export.md)
    "ExportSummary": _k(
        "name task export_sha256 source_name row_count ordered_corpus_sha256 input_adapter "
        "bundle_filename download_url"
    ),
    "ExportList": _k("data", children={"data": "ExportSummary"}),
    "ExportDetail": _k(
        "summary manifest",
        children={"summary": "ExportSummary", "manifest": "HfTrlExportManifestV1"},
    ),
    "DeleteExportResponse": _k("status name"),
    # --- Kiln's Rust types (no published JSON Schema read) -------------------------------
    "HfTrlTrainingResultV1": _k(
        "schema_version result_type export_sha256 task trainer effective_config output_adapter "
        "result_sha256",
        children={"trainer": "HfTrlTrainerIdentity", "output_adapter": "HfTrlOutputAdapter"},
        source="RUST",
    ),
    "HfTrlTrainerIdentity": _k(
        "kind python_version torch_version transformers_version trl_version peft_version script",
        children={"script": "HfTrlFileIdentity"},
        source="RUST",
    ),
    "HfTrlOutputAdapter": _k(
        "config model",
        children={"config": "HfTrlFileIdentity", "model": "HfTrlFileIdentity"},
        source="RUST",
    ),
    "HfTrlImportReceiptV1": _k(
        "schema_version import_type adapter_name task export_sha256 result_sha256 "
        "resident_model used_exported_reference_script import_sha256",
        children={"resident_model": "HfTrlResidentModelIdentityV1"},
        source="RUST",
    ),
    "HfTrlResidentModelIdentityV1": _k(
        "served_model_id base_weight_shard_manifest model_config_sha256 tokenizer_vocab_sha256 "
        "tokenizer_config_sha256 chat_template_sha256 native_training_chat_template_sha256 "
        "trl_training_chat_template_sha256",
        children={"base_weight_shard_manifest": "BaseWeightShardManifest"},
        source="RUST",
    ),
    "BaseWeightShardManifest": _k(
        "schema_version manifest_type aggregate_algorithm aggregate_sha256 total_size_bytes shards",
        children={"shards": "BaseWeightShard"},
        source="RUST",
    ),
    "BaseWeightShard": _k("filename size_bytes sha256", source="RUST"),
    "ExecutionProvenanceV1": _k(
        "schema_version provenance_type backend build model precision kernels configuration "
        "provenance_sha256",
        children={
            "backend": "BackendProvenanceV1",
            "build": "BuildProvenanceV1",
            "model": "ModelProvenanceV1",
            "precision": "PrecisionProvenanceV1",
            "kernels": "KernelContractV1",
            "configuration": "ConfigurationProvenanceV1",
        },
        source="RUST",
    ),
    "BackendProvenanceV1": _k("name device numerical_runtime_sha256", source="RUST"),
    "BuildProvenanceV1": _k(
        "package_version target executable_sha256 git_commit source_tree_sha256 source_dirty",
        "git_commit source_tree_sha256 source_dirty",
        source="RUST",
    ),
    "ModelProvenanceV1": _k(
        "model_config_sha256 tokenizer_vocab_sha256 tokenizer_config_sha256 "
        "chat_template_sha256 training_chat_template_sha256",
        "chat_template_sha256 training_chat_template_sha256",
        source="RUST",
    ),
    "PrecisionProvenanceV1": _k("inference_dtype training_policy", source="RUST"),
    "KernelContractV1": _k(
        "contract_type versions compiled_features contract_sha256", source="RUST"
    ),
    "ConfigurationProvenanceV1": _k(
        "effective_server_config_sha256 effective_environment_sha256", source="RUST"
    ),
    "SftIngestionReceipt": _k(
        "schema source source_locator invalid_row_policy rows_read rows_kept rows_rejected "
        "kept_row_hashes rejected_rows kept_corpus_sha256",
        "source_locator",
        children={"rejected_rows": "SftRejectedRow"},
        source="RUST",
    ),
    "SftRejectedRow": _k("row_index row_sha256 reason", source="RUST"),
}


def differences(name: str, value: object, path: str = "$") -> list[str]:
    """Every way ``value`` (parsed JSON) is not Kiln's record ``name``, child records too."""
    if name == "ReplayExchangeResult.kind":
        kind = value.get("kind") if isinstance(value, dict) else None
        name = f"ReplayExchangeResult.{kind}"
        if name not in KILN:
            return [f"{path}: kind {kind!r} is neither oneOf branch"]
    kiln = KILN[name]
    if not isinstance(value, dict):
        return [f"{path}: {name} is not an object"]
    found: list[str] = []
    keys = set(value)
    if kiln.closed and keys - kiln.allowed:
        found.append(f"{path}: {name} has no {sorted(keys - kiln.allowed)}")
    if kiln.required - keys:
        found.append(f"{path}: {name} requires {sorted(kiln.required - keys)}")
    for key, enum in kiln.enums.items():
        if key in value and value[key] not in KILN_ENUMS[enum]:
            found.append(f"{path}.{key}: {value[key]!r} is not one of Kiln's {enum}")
    for key, child in kiln.children.items():
        if key not in value:
            continue
        item = value[key]
        if isinstance(item, list):
            for index, element in enumerate(item):
                found.extend(differences(child, element, f"{path}.{key}[{index}]"))
        else:
            found.extend(differences(child, item, f"{path}.{key}"))
    return found
