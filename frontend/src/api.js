// The server's HTTP API. Every URL is relative (no leading slash) so the UI works behind a
// path prefix. Errors come back as ApiError with the server's own message.

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

export async function call(method, path, body) {
  const init = { method, headers: { ...auth.headers(), ...sessionHeaders(path) } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(path, init);
  if (!resp.ok) throw await errorOf(resp);
  return resp.status === 204 ? null : resp.json();
}

export const api = {
  sessions: () => call("GET", "v1/sessions?limit=200"),
  session: (id) => call("GET", `v1/sessions/${id}`),
  createSession: (body) => call("POST", "v1/sessions", body),
  updateSession: (id, body) => call("PATCH", `v1/sessions/${id}`, body),
  deleteSession: (id) => call("DELETE", `v1/sessions/${id}`),
  forkSession: (id, messageId) => call("POST", `v1/sessions/${id}/fork`, { message_id: messageId }),
  slots: () => call("GET", "slots"),
  cache: () => call("GET", "cache"),
  collections: () => call("GET", "v1/collections"),
  createCollection: (name) => call("POST", "v1/collections", { name }),
  deleteCollection: (id) => call("DELETE", `v1/collections/${id}`),
  documents: (collectionId) => call("GET", `v1/collections/${collectionId}/documents`),
  deleteDocument: (id) => call("DELETE", `v1/documents/${id}`),
};

export async function uploadMedia(file) {
  const resp = await fetch("v1/media", {
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
    xhr.open("POST", `v1/collections/${collectionId}/documents`);
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
// with an AbortError when `signal` aborts.
export async function stream(path, body, onEvent, signal) {
  const resp = await fetch(path, {
    method: "POST",
    headers: { ...auth.headers(), ...sessionHeaders(path), "Content-Type": "application/json" },
    body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
    signal,
  });
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
