// Run cards: everything a kiln.openenv-run.v5 status carries, refreshed by polling the
// run list. A card is rebuilt only when its status changed, so an open <details> or a
// focused button survives the polls of a run that is not moving.

import { call, runPath } from "./api.js";
import { badge, bytes, details, el, facts, jsonBlock, replace, shortDigest, time } from "./dom.js";

export const POLL_MS = 2000;
const TERMINAL = new Set(["rollout_ready", "completed", "failed", "cancelled"]);

function progress(done, total, label) {
  return el(
    "div",
    { class: "progress" },
    el("progress", { max: total, value: done }),
    el("span", { text: `${label} ${done} / ${total}` }),
  );
}

function statsFacts(stats) {
  if (!stats) return null;
  return facts([
    ["mean return", stats.mean_episode_return],
    ["min / max return", `${stats.min_episode_return} / ${stats.max_episode_return}`],
    ["done / max steps", `${stats.done_count} / ${stats.max_steps_count}`],
    ["invalid actions", stats.invalid_model_action_count],
    ["protocol errors", `${stats.protocol_error_count} (${stats.recoverable_protocol_error_count} recovered)`],
    ["capacity retries", stats.capacity_retry_count],
    ["environment steps", stats.total_environment_steps],
    ["model tokens", stats.total_model_tokens],
    ["mean model latency ms", stats.mean_model_latency_ms],
  ]);
}

function admission(status) {
  const a = status.admission;
  if (!a) return null;
  return facts([
    ["queue position", a.queue_position],
    ["sequence", a.sequence],
    ["max active runs", a.max_active_runs],
    ["queue wait ms", a.queue_wait_ms],
  ]);
}

function environments(status) {
  if (!status.environments) return null;
  return el(
    "ul",
    { class: "environments" },
    status.environments.map((identity) =>
      el(
        "li",
        {},
        el("strong", { text: identity.metadata ? identity.metadata.name : "" }),
        " ",
        el("code", { text: identity.base_url }),
        " schema ",
        el("code", { text: shortDigest(identity.schema_sha256) }),
      ),
    ),
  );
}

function training(status) {
  const t = status.training;
  if (!t) return null;
  const data = t.training_data || {};
  const corpus = data.openenv || {};
  return el(
    "div",
    { class: "section training" },
    el("h4", {}, "Training ", badge(t.state)),
    progress(Math.round(Number(t.progress) * 100), 100, "progress %"),
    facts([
      ["job", t.job_id],
      ["loss", t.current_loss],
      ["epoch", t.epoch],
      ["gate outcome", t.gate_outcome ? badge(t.gate_outcome, `gate-${t.gate_outcome}`) : null],
      ["post-eval verdict", t.post_eval_verdict],
      ["corpus rows", data.rows],
      ["corpus groups / rollouts", corpus.groups ? `${corpus.groups} / ${corpus.rollouts}` : null],
      ["corpus seeds", corpus.groups ? `${corpus.seed_min}..${corpus.seed_max} (${corpus.unique_seeds} unique)` : null],
      ["group plan", corpus.group_plan_sha256 ? shortDigest(corpus.group_plan_sha256) : null],
      ["error", t.error],
    ]),
    t.training_data ? details("corpus lineage", jsonBlock(t.training_data)) : null,
  );
}

function evaluation(status) {
  const e = status.environment_evaluation;
  if (!e) return null;
  const ev = e.evidence;
  return el(
    "div",
    { class: "section evaluation" },
    el("h4", {}, "Held-out evaluation ", badge(e.state), " ", e.outcome ? badge(e.outcome, `gate-${e.outcome}`) : null),
    progress(e.progress.rollouts_completed, e.progress.rollouts_total, `${e.progress.state} rollouts`),
    facts([
      ["seeds", `${e.seed_start}.. (${e.groups} groups x ${e.group_size})`],
      ["baseline mean", e.baseline_stats ? e.baseline_stats.mean_episode_return : null],
      ["candidate mean", e.candidate_stats ? e.candidate_stats.mean_episode_return : null],
      ["improved / regressed / tied", ev ? `${ev.improved_groups} / ${ev.regressed_groups} / ${ev.tied_groups}` : null],
      ["exact sign-test p", ev ? String(ev.exact_sign_test_p_value) : null],
      ["decision", ev ? ev.decision : null],
      ["reason", ev ? ev.reason : null],
      ["verdict", e.verdict],
    ]),
    details("baseline and candidate", jsonBlock({ baseline: e.baseline, candidate: e.candidate })),
  );
}

function failure(status) {
  const f = status.failure;
  if (!f) return status.error ? el("p", { class: "failure" }, status.error) : null;
  return el(
    "div",
    { class: "section failure" },
    el("h4", {}, "Failure ", badge(f.code, "failed")),
    facts([
      ["stage", f.stage],
      ["retryable", f.retryable ? "yes" : "no"],
      ["message", f.message],
      ["hint", f.hint],
      ["protocol code", f.protocol_code],
      ["HTTP status", f.http_status],
    ]),
  );
}

function artifacts(status) {
  if (!status.artifacts) return null;
  return el(
    "ul",
    { class: "artifacts" },
    status.artifacts.map((item) =>
      el(
        "li",
        {},
        // The link is built from the run id and kind, never taken from the status.
        el("a", {
          href: `${runPath(status.run_id)}/artifacts/${encodeURIComponent(item.kind)}`,
          download: `${item.kind}`,
          "data-sha256": item.sha256,
          "data-kind": item.kind,
          text: item.kind,
        }),
        " ",
        el("span", { class: "size", text: bytes(item.bytes) }),
        " ",
        el("code", { class: "digest", title: item.sha256, text: shortDigest(item.sha256) }),
      ),
    ),
  );
}

function card(status, onCancel) {
  const req = status.request;
  const node = el(
    "article",
    { class: `card state-${status.state}`, "data-run-id": status.run_id, "data-state": status.state },
    el(
      "header",
      {},
      el("h3", {}, el("code", { text: status.run_id.slice(0, 8) }), ` ${status.kind} `, badge(status.state)),
      TERMINAL.has(status.state)
        ? null
        : el("button", { type: "button", class: "cancel", onclick: () => onCancel(status.run_id), text: "Cancel" }),
    ),
    progress(status.progress.rollouts_completed, status.progress.rollouts_total, "rollouts"),
    facts([
      ["run id", status.run_id],
      ["submitted", time(status.submitted_unix_ms)],
      ["finished", time(status.finished_unix_ms)],
      ["idempotency key", req.idempotency_key],
      ["environments", req.environment_urls.join(" ")],
      ["adapter", req.adapter],
      ["groups x size", `${req.groups} x ${req.group_size} from seed ${req.seed_start}`],
      ["groups done", `${status.progress.groups_completed} / ${status.progress.groups_total}`],
    ]),
    admission(status),
    environments(status),
    status.training_contract ? details("admitted training contract", jsonBlock(status.training_contract)) : null,
    status.rollout_stats ? el("div", { class: "section" }, el("h4", { text: "Rollout statistics" }), statsFacts(status.rollout_stats)) : null,
    training(status),
    evaluation(status),
    failure(status),
    status.warnings ? el("ul", { class: "warnings" }, status.warnings.map((w) => el("li", { text: w }))) : null,
    artifacts(status),
  );
  return node;
}

export class RunBoard {
  constructor(root, note) {
    this.root = root;
    this.note = note;
    this.seen = new Map();
    this.timer = null;
  }

  start() {
    // A tab nobody looks at costs the server nothing; it catches up when shown again.
    document.addEventListener("visibilitychange", () => {
      if (!document.hidden) this.poll();
    });
    this.poll();
  }

  async poll() {
    clearTimeout(this.timer);
    if (document.hidden) return;
    try {
      const { value } = await call("GET", "/v1/openenv/runs");
      this.render(value.runs);
      // The first run list on screen, for benchmarks/dashboard.py (User Timing).
      if (performance.getEntriesByName("kiln:runs-rendered").length === 0) {
        performance.mark("kiln:runs-rendered");
      }
      replace(this.note, `${value.runs.length} run(s), updated ${new Date().toLocaleTimeString()}`);
    } catch (exc) {
      replace(this.note, el("span", { class: "error", text: `${exc.code || "unreachable"}: ${exc.message}` }));
    }
    this.timer = setTimeout(() => this.poll(), POLL_MS);
  }

  render(runs) {
    const keep = new Map();
    const nodes = runs.map((status) => {
      const text = JSON.stringify(status);
      const old = this.seen.get(status.run_id);
      const node = old && old.text === text ? old.node : card(status, (id) => this.cancel(id));
      keep.set(status.run_id, { text, node });
      return node;
    });
    this.seen = keep;
    if (nodes.length === 0) nodes.push(el("p", { class: "note", text: "No runs yet." }));
    const current = Array.from(this.root.children);
    if (current.length !== nodes.length || current.some((n, i) => n !== nodes[i])) {
      replace(this.root, nodes);
    }
  }

  async cancel(runId) {
    try {
      await call("DELETE", runPath(runId));
    } catch (exc) {
      replace(this.note, el("span", { class: "error", text: `${exc.code}: ${exc.message}` }));
    }
    this.poll();
  }
}
