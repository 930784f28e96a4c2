// The page's only way to the server: same-origin fetches of the public API routes, the
// server's typed refusals ({"error": {code, message, hint}}) kept intact for the caller.

export class ApiError extends Error {
  constructor(status, code, message, hint) {
    super(message);
    this.status = status;
    this.code = code;
    this.hint = hint;
  }
}

// A request that got no answer (the connection failed): the caller cannot know whether
// the server acted on it.
export class NoAnswer extends Error {}

export async function call(method, path, body, headers = {}) {
  const init = { method, headers: { accept: "application/json", ...headers }, cache: "no-store" };
  if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (exc) {
    throw new NoAnswer(`no answer from the server (${exc.message})`);
  }
  let value = null;
  try {
    value = await response.json();
  } catch (exc) {
    throw new ApiError(response.status, "answer_not_json", `HTTP ${response.status}`, "");
  }
  if (!response.ok) {
    const detail = (value && value.error) || {};
    throw new ApiError(
      response.status,
      String(detail.code || `http_${response.status}`),
      String(detail.message || `HTTP ${response.status}`),
      String(detail.hint || ""),
    );
  }
  return { status: response.status, value };
}

// A random (version 4) UUID. crypto.randomUUID exists only in secure contexts, and a
// team's server is often plain http on a LAN name, so the bytes come from
// getRandomValues, which every context has.
export function uuid4() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const hex = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export function runPath(runId) {
  return `/v1/openenv/runs/${encodeURIComponent(runId)}`;
}
