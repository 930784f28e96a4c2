// Hand-offs: the server's adapters (GET /v1/adapters, when a resident model is loaded)
// and the HF/TRL export registry (GET/DELETE /v1/train/hf/exports, download by name).

import { call } from "./api.js";
import { badge, bytes, el, replace, shortDigest } from "./dom.js";

export const REFRESH_MS = 10000;
const EXPORTS = "/v1/train/hf/exports";

function table(head, rows) {
  return el(
    "table",
    {},
    el("thead", {}, el("tr", {}, head.map((h) => el("th", { text: h })))),
    el("tbody", {}, rows),
  );
}

export class HandoffPanel {
  constructor(adaptersRoot, exportsRoot) {
    this.adaptersRoot = adaptersRoot;
    this.exportsRoot = exportsRoot;
    this.timer = null;
  }

  start() {
    this.refresh();
  }

  async refresh() {
    clearTimeout(this.timer);
    await Promise.all([this.adapters(), this.exports()]);
    this.timer = setTimeout(() => this.refresh(), REFRESH_MS);
  }

  async adapters() {
    try {
      const { value } = await call("GET", "/v1/adapters");
      const rows = value.available.map((a) =>
        el(
          "tr",
          { "data-adapter": a.name },
          el("td", { text: a.name }),
          el("td", {}, badge(a.status), " ", badge(a.canary_status, `canary-${a.canary_status}`)),
          el("td", { text: bytes(a.size_bytes) }),
          el("td", {}, el("code", { title: a.adapter_model_sha256 || "", text: shortDigest(a.adapter_model_sha256) })),
          el("td", { text: a.rank === null ? "" : `r${a.rank} / a${a.alpha}` }),
        ),
      );
      replace(
        this.adaptersRoot,
        el("p", { class: "note", text: `active: ${value.active_adapter || "base"}; ${value.available.length} installed` }),
        rows.length ? table(["name", "status", "size", "weights", "LoRA"], rows) : null,
      );
    } catch (exc) {
      const text = exc.code === "model_not_loaded"
        ? "No resident model on this server (kiln-verify serve --model DIR lists its adapters here)."
        : `${exc.code || "error"}: ${exc.message}`;
      replace(this.adaptersRoot, el("p", { class: "note", text }));
    }
  }

  async exports() {
    try {
      const { value } = await call("GET", EXPORTS);
      const rows = value.data.map((x) =>
        el(
          "tr",
          { "data-export": x.name },
          el("td", { text: x.name }),
          el("td", { text: x.task }),
          el("td", {}, el("code", { title: x.export_sha256, text: shortDigest(x.export_sha256) })),
          el("td", { text: String(x.row_count) }),
          el("td", { text: x.source_name }),
          el(
            "td",
            {},
            // Built from the name, never taken from the answer's download_url.
            el("a", { href: `${EXPORTS}/${encodeURIComponent(x.name)}/download`, download: `${x.name}.kiln-hf`, text: "download" }),
            " ",
            el("button", { type: "button", class: "delete", text: "Delete", onclick: () => this.remove(x) }),
          ),
        ),
      );
      replace(
        this.exportsRoot,
        rows.length
          ? table(["name", "task", "digest", "rows", "source", ""], rows)
          : el("p", { class: "note", text: "No HF/TRL exports." }),
      );
    } catch (exc) {
      const text = exc.code === "model_not_loaded"
        ? "The HF/TRL export registry needs a resident model (kiln-verify serve --model DIR)."
        : `${exc.code || "error"}: ${exc.message}`;
      replace(this.exportsRoot, el("p", { class: "note", text }));
    }
  }

  async remove(summary) {
    try {
      // The delete names the digest the reader saw: another export under the same name
      // since then is refused (412), never deleted.
      await call("DELETE", `${EXPORTS}/${encodeURIComponent(summary.name)}`, undefined, {
        "if-match": `"${summary.export_sha256}"`,
      });
    } catch (exc) {
      replace(this.exportsRoot, el("p", { class: "error", text: `${exc.code}: ${exc.message}` }));
      return;
    }
    this.refresh();
  }
}
