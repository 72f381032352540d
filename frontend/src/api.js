// The server's HTTP API. Every URL is relative (no leading slash) so the UI works behind a
// path prefix. Errors come back as ApiError with the server's own message.
//
// Behind a router (a server started with --models-dir, as llama-server's router) every request
// names its model (`?model=`; a turn's body names it too): models.js sets `routing` up there.
// A single-model server gets no model named, as before.

export class ApiError extends Error {
  constructor(message, status, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

// An API key (servers started with keys need `Authorization: Bearer KEY` on every API call);
// kept in this browser. `onUnauthorized` is told when the server asks for one.
const KEY = "kvchat.apiKey";
export const auth = {
  key: () => localStorage.getItem(KEY) || "",
  setKey: (key) => (key ? localStorage.setItem(KEY, key) : localStorage.removeItem(KEY)),
  headers: () => (auth.key() ? { Authorization: `Bearer ${auth.key()}` } : {}),
  onUnauthorized: () => {},
};

async function errorOf(resp) {
  let body = null;
  try {
    body = await resp.json();
  } catch {
    /* not JSON */
  }
  const message = body?.error?.message || body?.detail || `${resp.status} ${resp.statusText}`;
  if (resp.status === 401) auth.onUnauthorized(message);
  return new ApiError(message, resp.status, body);
}

// Behind nginx (deploy/nginx.conf) a session's requests go to the replica holding its KV: the
// key is the id in a /v1/sessions/{id} path, or this header where the path is not the one
// nginx matches (the UI served under a path prefix).
const SESSION_PATH = /^v1\/sessions\/([^/?]+)/;
export function sessionHeaders(path) {
  const m = SESSION_PATH.exec(path);
  return m ? { "X-Session-Id": decodeURIComponent(m[1]) } : {};
}

// Router mode's hooks (models.js): `model()` is the model a request names when the caller
// names none (null: name none); `watch(promise, model)` is told of every request that names a
// model until its answer starts (it may wait for the model to load); `failed()` is asked, after a
// request's model failed to load, for another model to name (null: none).
export const routing = {
  model: () => null,
  watch: (promise) => promise,
  failed: async () => null,
};

// `path` with `?model=` (and `&autoload=false`) added; `model` null: unchanged.
export function withModel(path, model, autoload) {
  if (!model) return path;
  const q = new URLSearchParams({ model, ...(autoload === false ? { autoload: "false" } : {}) });
  return `${path}${path.includes("?") ? "&" : "?"}${q}`;
}

// A request; `opts.model` names its model (undefined: routing's choice, null: none) and
// `opts.autoload: false` asks the router not to load it for this request.
export async function call(method, path, body, opts = {}) {
  const named = opts.model === undefined ? routing.model() : opts.model;
  try {
    return await send(method, withModel(path, named, opts.autoload), body, named);
  } catch (e) {
    // The model named by default could not load (a broken file): another one answers, once.
    if (opts.model !== undefined || !named || e.status !== 503) throw e;
    const other = await routing.failed();
    if (!other || other === named) throw e;
    return send(method, withModel(path, other, opts.autoload), body, other);
  }
}

async function send(method, path, body, model) {
  const init = { method, headers: { ...auth.headers(), ...sessionHeaders(path) } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const answer = fetch(path, init);
  const resp = await (model ? routing.watch(answer, model) : answer);
  if (!resp.ok) throw await errorOf(resp);
  return resp.status === 204 ? null : resp.json();
}

export const api = {
  sessions: () => call("GET", "v1/sessions?limit=200"),
  session: (id) => call("GET", `v1/sessions/${id}`),
  createSession: (body) => call("POST", "v1/sessions", body),
  updateSession: (id, body, model) => call("PATCH", `v1/sessions/${id}`, body, { model }),
  deleteSession: (id) => call("DELETE", `v1/sessions/${id}`),
  forkSession: (id, messageId) => call("POST", `v1/sessions/${id}/fork`, { message_id: messageId }),
  // One model's state: behind a router, the conversation's model, never loaded for this.
  slots: (model) => call("GET", "slots", undefined, { model, autoload: false }),
  cache: (model) => call("GET", "cache", undefined, { model, autoload: false }),
  collections: () => call("GET", "v1/collections"),
  createCollection: (name) => call("POST", "v1/collections", { name }),
  collection: (id) => call("GET", `v1/collections/${id}`),
  updateCollection: (id, body) => call("PATCH", `v1/collections/${id}`, body),
  deleteCollection: (id) => call("DELETE", `v1/collections/${id}`),
  documents: (collectionId) => call("GET", `v1/collections/${collectionId}/documents`),
  deleteDocument: (id) => call("DELETE", `v1/documents/${id}`),
};

export async function uploadMedia(file) {
  const resp = await fetch(withModel("v1/media", routing.model()), {
    method: "POST",
    headers: { ...auth.headers(), "Content-Type": file.type || "application/octet-stream" },
    body: file,
  });
  if (!resp.ok) throw await errorOf(resp);
  return resp.json();
}

// Multipart upload with progress (fetch has no upload progress; XMLHttpRequest does).
export function uploadDocument(collectionId, file, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", withModel(`v1/collections/${collectionId}/documents`, routing.model()));
    if (auth.key()) xhr.setRequestHeader("Authorization", `Bearer ${auth.key()}`);
    xhr.upload.onprogress = (e) => e.lengthComputable && onProgress(e.loaded / e.total);
    xhr.onerror = () => reject(new ApiError("the upload failed: network error", 0, null));
    xhr.onload = () => {
      let body = null;
      try {
        body = JSON.parse(xhr.responseText);
      } catch {
        /* not JSON */
      }
      if (xhr.status === 401) auth.onUnauthorized(body?.error?.message || "an API key is needed");
      if (xhr.status >= 200 && xhr.status < 300) resolve(body);
      else reject(new ApiError(body?.error?.message || `upload failed (${xhr.status})`, xhr.status, body));
    };
    const form = new FormData();
    form.append("file", file);
    xhr.send(form);
  });
}

// POST a streaming chat request and call onEvent(chunk) for every SSE data object. Resolves
// when the stream ends; rejects with ApiError for an error status or an error event, and
// with an AbortError when `signal` aborts. `model`: the model that runs it (router mode), named
// in the body and the query.
export async function stream(path, body, onEvent, signal, model = null) {
  const answer = fetch(withModel(path, model), {
    method: "POST",
    headers: { ...auth.headers(), ...sessionHeaders(path), "Content-Type": "application/json" },
    body: JSON.stringify({
      ...body,
      ...(model ? { model } : {}),
      stream: true,
      stream_options: { include_usage: true },
    }),
    signal,
  });
  const resp = await (model ? routing.watch(answer, model) : answer);
  if (!resp.ok) throw await errorOf(resp);
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    const events = buffer.split(/\r?\n\r?\n/);
    buffer = events.pop();
    for (const ev of events) {
      const data = ev
        .split(/\r?\n/)
        .filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).trimStart())
        .join("\n");
      if (!data || data === "[DONE]") continue;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new ApiError(chunk.error.message, chunk.error.code || 500, chunk);
      onEvent(chunk);
    }
  }
}
