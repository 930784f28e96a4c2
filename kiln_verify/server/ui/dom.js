// DOM helpers. Every string a peer supplied (environment metadata, observations, task
// rows, failure messages, adapter and export names) reaches the page through text nodes
// or textContent only; nothing here ever parses markup.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = String(value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

export function replace(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

// A definition list of [label, value] pairs; pairs whose value is absent are left out.
export function facts(pairs, cls = "facts") {
  const list = el("dl", { class: cls });
  for (const [label, value] of pairs) {
    if (value === undefined || value === null || value === "") continue;
    list.append(el("dt", { text: label }), el("dd", {}, value));
  }
  return list;
}

export function badge(text, kind = text) {
  return el("span", { class: `badge badge-${String(kind).replace(/[^a-z0-9_-]/gi, "")}` }, text);
}

// JSON shown as text (a <pre>), never interpreted.
export function jsonBlock(value) {
  return el("pre", { class: "json" }, JSON.stringify(value, null, 2));
}

export function details(summary, ...children) {
  return el("details", {}, el("summary", { text: summary }), ...children);
}

export function bytes(count) {
  if (typeof count !== "number") return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = count;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${count} B` : `${value.toFixed(1)} ${units[unit]}`;
}

export function shortDigest(digest) {
  const hex = String(digest || "").replace(/^sha256:/, "");
  return hex.slice(0, 12);
}

export function time(unixMs) {
  if (typeof unixMs !== "number") return "";
  return new Date(unixMs).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}
