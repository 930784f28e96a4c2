// Environments: Inspect (identity, schemas, discovery digest) and the Task API catalog
// (splits and one bounded page of rows, at most 200) through the server's own routes.
// Everything shown here was written by the environment's operator: text nodes only.

import { call } from "./api.js";
import { badge, details, el, facts, jsonBlock, replace, shortDigest } from "./dom.js";

export const MAX_PAGE = 200;

function targets(urlsBox, handlesBox) {
  const urls = urlsBox.value.split(/\n/).map((l) => l.trim()).filter((l) => l !== "");
  const body = { environment_urls: urls };
  const handles = handlesBox.value.split(/\n/).map((l) => l.trim());
  if (handles.some((l) => l !== "")) body.credential_ids = handles.map((l) => (l === "" ? null : l));
  return body;
}

function refusal(exc) {
  return el("p", { class: "error" }, `${exc.code || "error"}: ${exc.message}${exc.hint ? ` (${exc.hint})` : ""}`);
}

function inspection(item) {
  const id = item.identity;
  const meta = id.metadata || {};
  return el(
    "article",
    { class: "card environment" },
    el("h3", {}, el("span", { class: "env-name", text: meta.name }), " ", badge(id.authentication || "none", "auth")),
    facts([
      ["description", meta.description],
      ["version", meta.version],
      ["author", meta.author],
      // shown as text: a link would send the reader off this origin
      ["documentation", meta.documentation_url],
      ["base URL", el("code", { text: id.base_url })],
      ["WebSocket", el("code", { text: id.websocket_url })],
      ["environments", (id.environments || []).join(", ")],
      ["OpenAPI", id.openapi_version],
      ["schema digest", el("code", { title: id.schema_sha256, text: shortDigest(id.schema_sha256) })],
      ["discovery digest", id.discovery_sha256 ? el("code", { title: id.discovery_sha256, text: shortDigest(id.discovery_sha256) }) : null],
    ]),
    meta.readme_content ? details("README", el("pre", { class: "readme", text: meta.readme_content })) : null,
    details("action, observation and state schemas", jsonBlock(item.schema)),
  );
}

export class EnvironmentPanel {
  constructor(root) {
    this.root = root;
    this.urls = el("textarea", { id: "env-urls", rows: 2, spellcheck: "false" });
    this.handles = el("textarea", { id: "env-handles", rows: 1, spellcheck: "false" });
    this.split = el("input", { id: "task-split", type: "text", spellcheck: "false" });
    this.start = el("input", { id: "task-start", type: "text", inputmode: "numeric", value: "0" });
    this.limit = el("input", { id: "task-limit", type: "text", inputmode: "numeric", value: "50" });
    this.out = el("div", { id: "env-out" });
    const field = (label, control) => el("div", { class: "field" }, el("label", { for: control.id, text: label }), control);
    replace(
      root,
      field("Environment URLs (one per line)", this.urls),
      field("Credential handles (optional, one per URL)", this.handles),
      el(
        "div",
        { class: "row" },
        el("button", { type: "button", id: "inspect", text: "Inspect", onclick: () => this.inspect() }),
        field("Split", this.split),
        field("Start", this.start),
        field(`Rows (1..${MAX_PAGE})`, this.limit),
        el("button", { type: "button", id: "tasks", text: "Task catalog", onclick: () => this.tasks() }),
        el("button", { type: "button", id: "tasks-next", text: "Next page", onclick: () => this.page(1) }),
      ),
      this.out,
    );
  }

  async inspect() {
    replace(this.out, el("p", { class: "note", text: "Inspecting..." }));
    try {
      const { value } = await call("POST", "/v1/openenv/inspect", targets(this.urls, this.handles));
      replace(this.out, value.environments.map(inspection));
    } catch (exc) {
      replace(this.out, refusal(exc));
    }
  }

  page(direction) {
    const start = Number(this.start.value) || 0;
    const limit = Math.min(Math.max(Number(this.limit.value) || 50, 1), MAX_PAGE);
    this.start.value = String(Math.max(start + direction * limit, 0));
    this.tasks();
  }

  async tasks() {
    const body = targets(this.urls, this.handles);
    const split = this.split.value.trim();
    if (split !== "") body.split = split;
    body.start = Number(this.start.value) || 0;
    body.limit = Math.min(Math.max(Number(this.limit.value) || 50, 1), MAX_PAGE);
    replace(this.out, el("p", { class: "note", text: "Reading the task catalog..." }));
    try {
      const { value } = await call("POST", "/v1/openenv/tasks", body);
      replace(this.out, value.catalogs.map((entry) => this.catalog(entry)));
    } catch (exc) {
      replace(this.out, refusal(exc));
    }
  }

  catalog(entry) {
    const c = entry.catalog;
    const splits = el(
      "div",
      { class: "splits" },
      c.splits.map((s) =>
        el("button", {
          type: "button",
          class: "split",
          text: `${s.name} (${s.type})`,
          onclick: () => {
            this.split.value = s.name;
            this.start.value = "0";
            this.tasks();
          },
        }),
      ),
    );
    const rows = c.tasks
      ? el(
          "table",
          { class: "tasks" },
          el("thead", {}, el("tr", {}, el("th", { text: "#" }), el("th", { text: "task row" }))),
          el(
            "tbody",
            {},
            c.tasks.slice(0, MAX_PAGE).map((row, i) =>
              el("tr", {}, el("td", { text: String((c.start || 0) + i) }), el("td", {}, el("code", { text: JSON.stringify(row) }))),
            ),
          ),
        )
      : null;
    return el(
      "article",
      { class: "card catalog" },
      el("h3", {}, el("span", { class: "env-name", text: c.environment_name }), " ", badge(c.task_api)),
      facts([
        ["base URL", el("code", { text: entry.base_url })],
        ["split", c.selected_split],
        ["tasks", c.num_tasks],
        ["rows shown", c.tasks ? `${c.start}..${c.stop}` : null],
      ]),
      splits,
      rows,
    );
  }
}
