// The start-a-run form: OpenEnvRunRequest's fields with its defaults, the body checked by
// the server alone (its typed refusal is shown next to the field it names), and an
// idempotency key made here and reused while the identical submission is unresolved, so
// a lost answer is retried into the run the server already accepted.

import { ApiError, NoAnswer, call, uuid4 } from "./api.js";
import { el, replace } from "./dom.js";

// [name, label, type, default, train-only]; the defaults are OpenEnvRunRequest's (a test
// compares them with the Python record).
export const FIELDS = [
  ["kind", "Kind", "kind", "rollout", false],
  ["environment_urls", "Environment URLs (one per line)", "lines", "", false],
  ["credential_ids", "Credential handles (one per URL; blank line = public)", "handles", "", false],
  ["adapter", "Adapter", "text", "base", false],
  ["groups", "Groups", "int", "8", false],
  ["group_size", "Group size", "int", "4", false],
  ["seed_start", "First seed", "int", "0", false],
  ["max_steps", "Max steps", "int", "8", false],
  ["concurrency", "Concurrency", "int", "4", false],
  ["max_action_tokens", "Max action tokens", "int", "256", false],
  ["thinking_budget_tokens", "Thinking budget tokens (optional)", "int", "", false],
  ["temperature", "Temperature", "float", "1.0", false],
  ["thinking", "Thinking", "bool", true, false],
  ["protocol_error_reward", "Protocol error reward", "float", "-1.0", false],
  ["max_recoverable_errors", "Max recoverable errors", "int", "3", false],
  ["capacity_wait_seconds", "Capacity wait (s)", "int", "300", false],
  ["reset_options", "Reset options (JSON object)", "json", "{}", false],
  ["environment_reset_options", "Per-environment reset options (JSON list, optional)", "json", "", false],
  ["output_adapter", "Output adapter", "text", "", true],
  ["training_config", "GRPO overrides: training_config (JSON, optional)", "json", "", true],
  ["auto_load", "Auto-load the adapter", "bool", true, true],
  ["environment_eval", "Held-out evaluation: environment_eval (JSON, optional)", "json", "", true],
  ["post_eval", "post_eval (JSON, optional)", "json", "", true],
];

// Typed refusals that belong to one field even though their message names none.
const CODE_FIELDS = {
  openenv_invalid_url: "environment_urls",
  openenv_remote_environment_forbidden: "environment_urls",
  openenv_invalid_credential: "credential_ids",
  openenv_adapter_unknown: "adapter",
  openenv_run_kind_unsupported: "kind",
  openenv_training_config_unsupported: "training_config",
  openenv_training_request_invalid: "training_config",
  openenv_environment_eval_invalid: "environment_eval",
  openenv_post_eval_unsupported: "post_eval",
};

function fieldOf(error) {
  const path = /\bat \$\.([a-z_]+)/.exec(error.message);
  if (path && FIELDS.some(([name]) => name === path[1])) return path[1];
  return CODE_FIELDS[error.code] || null;
}

function input(name, type, value) {
  const id = `f-${name}`;
  if (type === "kind") {
    return el("select", { id, name }, el("option", { value: "rollout", text: "rollout" }), el("option", { value: "train", text: "train" }));
  }
  if (type === "bool") return el("input", { id, name, type: "checkbox", checked: value });
  if (type === "lines" || type === "handles" || type === "json") {
    const area = el("textarea", { id, name, rows: type === "json" ? 2 : 2, spellcheck: "false" });
    area.value = value;
    return area;
  }
  const box = el("input", { id, name, type: "text", inputmode: type === "text" ? "text" : "decimal", spellcheck: "false" });
  box.value = value;
  return box;
}

// A number when the text is one, else the text itself, so the server's typed error (not
// a guess of ours) says what is wrong with it.
function number(text, integer) {
  const pattern = integer ? /^-?\d+$/ : /^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/;
  return pattern.test(text) ? Number(text) : text;
}

function jsonValue(text) {
  try {
    return JSON.parse(text);
  } catch (exc) {
    return text; // the server refuses a string here at the field's own path
  }
}

export class RunForm {
  constructor(root, onCreated) {
    this.root = root;
    this.onCreated = onCreated;
    this.pending = null; // {body, key}: the submission whose answer has not arrived
    this.controls = new Map();
    this.errors = new Map();
    this.build();
  }

  build() {
    const form = el("form", { id: "run-form", novalidate: true });
    const common = el("fieldset", {}, el("legend", { text: "Run" }));
    const train = el("fieldset", { id: "train-fields" }, el("legend", { text: "Training (kind=train)" }));
    for (const [name, label, type, value, trainOnly] of FIELDS) {
      const control = input(name, type, value);
      const error = el("span", { class: "field-error", id: `e-${name}`, role: "alert" });
      this.controls.set(name, [control, type]);
      this.errors.set(name, error);
      const row = el("div", { class: "field", "data-field": name }, el("label", { for: control.id, text: label }), control, error);
      (trainOnly ? train : common).append(row);
    }
    this.status = el("p", { id: "form-status", class: "note", role: "status" });
    this.formError = el("p", { id: "form-error", class: "field-error", role: "alert" });
    this.submit = el("button", { type: "submit", id: "start-run", text: "Start run" });
    form.append(common, train, this.formError, this.submit, this.status);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.send();
    });
    const kind = this.controls.get("kind")[0];
    const toggle = () => { train.hidden = kind.value !== "train"; };
    kind.addEventListener("change", toggle);
    toggle();
    replace(this.root, form);
  }

  body() {
    const body = {};
    const kind = this.controls.get("kind")[0].value;
    for (const [name, , type, , trainOnly] of FIELDS) {
      if (trainOnly && kind !== "train") continue;
      const [control] = this.controls.get(name);
      if (type === "bool") {
        body[name] = control.checked;
        continue;
      }
      const text = control.value.trim();
      if (type === "lines") body[name] = text === "" ? [] : text.split(/\n/).map((l) => l.trim()).filter((l) => l !== "");
      else if (type === "handles") {
        const lines = control.value.split(/\n/).map((l) => l.trim());
        if (lines.some((l) => l !== "")) body[name] = lines.map((l) => (l === "" ? null : l));
      } else if (text === "") continue;
      else if (type === "int" || type === "float") body[name] = number(text, type === "int");
      else if (type === "json") body[name] = jsonValue(text);
      else body[name] = text;
    }
    return body;
  }

  clearErrors() {
    for (const [name, error] of this.errors) {
      error.textContent = "";
      this.controls.get(name)[0].removeAttribute("aria-invalid");
    }
    this.formError.textContent = "";
  }

  async send() {
    this.clearErrors();
    const body = this.body();
    const text = JSON.stringify(body);
    if (!this.pending || this.pending.body !== text) this.pending = { body: text, key: uuid4() };
    const key = this.pending.key;
    this.submit.disabled = true;
    replace(this.status, `Submitting with idempotency key ${key}`);
    try {
      const { status, value } = await call("POST", "/v1/openenv/runs", { ...body, idempotency_key: key });
      this.pending = null;
      replace(this.status, `${status === 202 ? "Accepted" : "Already accepted"}: run ${value.run_id} (key ${key})`);
      this.onCreated(value);
    } catch (exc) {
      if (exc instanceof NoAnswer || (exc instanceof ApiError && exc.status >= 500)) {
        // Unresolved: the same submission is sent again with the same key.
        replace(this.status, `${exc.message}; submit again to retry with the same key ${key}`);
      } else {
        this.pending = null;
        this.showError(exc);
        replace(this.status, "");
      }
    } finally {
      this.submit.disabled = false;
    }
  }

  showError(exc) {
    const name = exc instanceof ApiError ? fieldOf(exc) : null;
    const text = `${exc.code || "error"}: ${exc.message}${exc.hint ? ` (${exc.hint})` : ""}`;
    if (name) {
      this.errors.get(name).textContent = text;
      this.controls.get(name)[0].setAttribute("aria-invalid", "true");
      this.controls.get(name)[0].focus();
    } else {
      this.formError.textContent = text;
    }
  }
}
