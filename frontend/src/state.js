// Application state (signals) and the actions that change it. The server is the truth: after
// every turn the session is read back, so what a reload shows is what the user saw.
import { batch, computed, signal } from "@preact/signals";
import { ApiError, api, auth, stream, uploadMedia } from "./api.js";
import {
  defaultModel,
  detectRouter,
  followConversation,
  forgetModel,
  modelInfo,
  modelOf,
  pickModel,
  rememberModel,
} from "./models.js";
import { presetDefaults } from "./presets.js";

export const sessions = signal([]);
export const current = signal(null); // the open session, with messages
export const live = signal(null); // {user, text, citations, status} while a reply streams
export const busy = signal(false); // a reply streams or is being stopped: Send disabled
export const notice = signal(null); // {kind: "error"|"info", text}
export const attachments = signal([]); // [{id, url, name, status, error}]
export const panel = signal(null); // "settings" | "cache" | "documents" | null
export const sidebarOpen = signal(false);

export const keyNeeded = signal(null); // the server's 401 message: ask for an API key
let controller = null;

export const currentId = computed(() => current.value?.id ?? null);
// The open conversation's model behind a router (models.js); null on a single-model server.
export const currentModel = computed(() => modelOf(current.value));
followConversation(() => currentModel.value);

auth.onUnauthorized = (message) => {
  keyNeeded.value = message;
};

// First load, and again once an API key is given: the sessions, then the one in the URL (or
// the newest, or a new one).
export async function start() {
  try {
    await detectRouter();
    await loadSessions();
    const m = location.hash.match(/^#\/s\/([0-9a-f]+)$/);
    if (m) await openSession(m[1]);
    else if (sessions.value.length) await openSession(sessions.value[0].id);
    else await newSession();
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) showError(e);
  }
}

export async function applyKey(key) {
  auth.setKey(key.trim());
  keyNeeded.value = null;
  notice.value = null;
  await start();
}

export function showError(e) {
  notice.value = { kind: "error", text: e instanceof Error ? e.message : String(e) };
}

export async function loadSessions() {
  sessions.value = (await api.sessions()).data;
}

export async function openSession(id) {
  if (busy.value) return;
  try {
    current.value = await api.session(id);
    notice.value = null;
    if (location.hash !== `#/s/${id}`) history.replaceState(null, "", `#/s/${id}`);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) {
      current.value = null;
      history.replaceState(null, "", "#");
    }
    showError(e);
  }
  sidebarOpen.value = false;
}

export async function newSession() {
  if (busy.value) return;
  const d = presetDefaults();
  const model = defaultModel();
  const s = await api.createSession({
    title: "New chat",
    system_prompt: d.system_prompt,
    sampling: d.sampling,
    ...namedModel(model),
  });
  rememberModel(s.id, model);
  await loadSessions();
  await openSession(s.id);
}

// A new session names its model (stored where the server stores one) unless that model is
// known to have failed: the session is made anyway, on whichever model answers.
function namedModel(model) {
  return model && modelInfo(model)?.status !== "failed" ? { model } : {};
}

// The user picked a model for the open conversation. A server that stores the session's model
// (its session has a `model` field) is told; this browser remembers it either way.
export async function chooseModel(model) {
  const s = current.value;
  if (!s || model === currentModel.value) return;
  if (s.model !== undefined) current.value = { ...s, model };
  try {
    await pickModel(s.id, model);
    if (s.model !== undefined && modelInfo(model)?.status !== "failed") {
      await api.updateSession(s.id, { model }, model);
    }
  } catch (e) {
    showError(e);
  }
}

export async function renameSession(id, title) {
  await api.updateSession(id, { title });
  await loadSessions();
  if (currentId.value === id) current.value = { ...current.value, title };
}

export async function saveSettings(id, system_prompt, sampling) {
  await api.updateSession(id, { system_prompt, sampling });
  await reloadCurrent();
}

export async function deleteSession(id) {
  await api.deleteSession(id);
  localStorage.removeItem(`rag:${id}`);
  localStorage.removeItem(`kvReuse:${id}`);
  forgetModel(id);
  if (currentId.value === id) {
    current.value = null;
    history.replaceState(null, "", "#");
  }
  await loadSessions();
}

async function reloadCurrent() {
  const id = currentId.value;
  if (id) current.value = await api.session(id);
}

// The collections this conversation answers from (kept in this browser per session).
export function ragCollections(id) {
  try {
    return JSON.parse(localStorage.getItem(`rag:${id}`) || "[]");
  } catch {
    return [];
  }
}

export function setRagCollections(id, ids) {
  localStorage.setItem(`rag:${id}`, JSON.stringify(ids));
}

// How this conversation's document turns reuse the sources' KV: "prefix" or "blend" (chunk KV
// placed at any position; docs/blend.md), or "" for the server's default (--kv-reuse).
export function ragReuse(id) {
  return localStorage.getItem(`kvReuse:${id}`) || "";
}

export function setRagReuse(id, mode) {
  if (mode) localStorage.setItem(`kvReuse:${id}`, mode);
  else localStorage.removeItem(`kvReuse:${id}`);
}

function ragOptions(id) {
  const collections = ragCollections(id);
  if (!collections.length) return null;
  const reuse = ragReuse(id);
  return { collection_ids: collections, ...(reuse ? { kv_reuse: reuse } : {}) };
}

// Runs one streamed turn: `path` is messages or regenerate; `user` the user message shown
// meanwhile (null: the last one stays). The reply and its figures are read back afterwards.
// False when the server refused the request before anything was stored.
async function runTurn(path, body, user) {
  const id = currentId.value;
  const model = currentModel.value; // router mode: the turn names it, and it stays this one's
  rememberModel(id, model);
  busy.value = true;
  if (notice.value?.kind === "error") notice.value = null; // an info line (a branch's note) stays
  controller = new AbortController();
  const started = performance.now();
  live.value = { user, text: "", citations: null, status: "waiting", ttftMs: null, model };
  let refused = false;
  const rag = ragOptions(id);
  if (rag) body = { ...body, rag };
  try {
    await stream(
      `v1/sessions/${id}/${path}`,
      body,
      (chunk) => {
        const choice = chunk.choices?.[0];
        const citations = chunk.citations || choice?.delta?.citations;
        const delta = choice?.delta?.content;
        const thought = choice?.delta?.reasoning_content;
        const next = { ...live.value };
        if (citations) next.citations = citations;
        if (thought) next.reasoning = (next.reasoning || "") + thought;
        if (delta || thought) {
          const now = performance.now();
          next.ttftMs ??= now - started;
          next.firstAt ??= now;
          next.lastAt = now;
          next.pieces = (next.pieces || 0) + 1; // one token per delta from this server
          if (delta) next.text += delta;
          if (next.status !== "stopping") next.status = "streaming";
        }
        live.value = next;
      },
      controller.signal,
      model,
    );
  } catch (e) {
    if (e.name !== "AbortError") showError(e);
    // Refused before anything streamed (bad input, queue full): nothing was stored.
    refused = e instanceof ApiError && live.value?.status === "waiting";
  } finally {
    controller = null;
    await settle(id);
  }
  return !refused;
}

// After a turn: read the session back. After Stop, until the stopped reply is stored: the
// server stores it once it notices the client went away, a moment after the abort. The stored
// turn replaces the live one in one update, so nothing shows twice.
async function settle(id) {
  const stopped = live.value?.status === "stopping";
  let s = null;
  try {
    for (let i = 0; i < 40; i++) {
      s = await api.session(id);
      const last = s.messages[s.messages.length - 1];
      if (!stopped || !last || last.role === "assistant") break;
      await new Promise((r) => setTimeout(r, 250));
    }
  } catch (e) {
    showError(e);
  }
  batch(() => {
    if (s && currentId.value === id) current.value = s;
    live.value = null;
    busy.value = false;
  });
  await loadSessions().catch(showError);
}

export async function send(text) {
  if (busy.value || !current.value) return false;
  const ready = attachments.value.filter((a) => a.id);
  if (attachments.value.some((a) => a.status === "uploading")) {
    notice.value = { kind: "info", text: "Wait for the images to finish uploading." };
    return false;
  }
  if (!text.trim() && !ready.length) return false;
  const content = ready.length
    ? [
        ...ready.map((a) => ({ type: "image_file", image_file: { file_id: a.id } })),
        ...(text.trim() ? [{ type: "text", text }] : []),
      ]
    : text;
  const attached = attachments.value;
  attachments.value = [];
  const s = current.value;
  if (s.title === "New chat" && s.messages.length === 0 && text.trim()) {
    const title = text.trim().slice(0, 48);
    api.updateSession(s.id, { title }).then(loadSessions, () => {});
    current.value = { ...s, title };
  }
  const ok = await runTurn("messages", { content }, { role: "user", content });
  if (!ok) attachments.value = attached; // refused: the message stays in the box to fix
  return ok;
}

export async function regenerate() {
  if (busy.value || !current.value) return;
  await runTurn("regenerate", {}, null);
}

export function stop() {
  if (controller) {
    live.value = { ...live.value, status: "stopping" };
    controller.abort();
  }
}

// Edit an earlier user message: fork the session before it, then send the new text there.
export async function editAsBranch(message, text) {
  if (busy.value) return;
  const s = current.value;
  const fork = await api.forkSession(s.id, message.id);
  rememberModel(fork.id, currentModel.value);
  await api.updateSession(fork.id, { title: `${s.title || "Chat"} (edit)` });
  setRagCollections(fork.id, ragCollections(s.id));
  setRagReuse(fork.id, ragReuse(s.id));
  await loadSessions();
  await openSession(fork.id);
  notice.value = {
    kind: "info",
    text: `New branch from "${s.title || "Chat"}": ${fork.cache.kept_tokens} cached tokens kept, ${fork.cache.given_up_tokens} given up.`,
  };
  const parts = Array.isArray(message.content) ? message.content.filter((p) => p.type === "image_file") : [];
  const content = parts.length ? [...parts, { type: "text", text }] : text;
  await runTurn("messages", { content }, { role: "user", content });
}

export async function attach(files) {
  for (const file of files) {
    if (!file.type.startsWith("image/")) {
      notice.value = { kind: "error", text: `${file.name}: only images can be attached here (documents go in the Documents panel).` };
      continue;
    }
    const entry = { key: crypto.randomUUID(), url: URL.createObjectURL(file), name: file.name, status: "uploading" };
    attachments.value = [...attachments.value, entry];
    const update = (fields) => {
      attachments.value = attachments.value.map((a) => (a.key === entry.key ? { ...a, ...fields } : a));
    };
    try {
      const media = await uploadMedia(file);
      update({ id: media.id, status: "ready" });
    } catch (e) {
      update({ status: "error", error: e.message });
      showError(e);
    }
  }
}

export function removeAttachment(key) {
  attachments.value = attachments.value.filter((a) => a.key !== key);
}

export async function importSession(file) {
  const data = JSON.parse(await file.text());
  if (!Array.isArray(data.messages)) throw new Error("not a kvchat conversation export (no messages)");
  const s = await api.createSession({
    title: data.title || file.name.replace(/\.json$/, ""),
    system_prompt: data.system_prompt ?? null,
    sampling: data.sampling || {},
    messages: data.messages.map((m) => ({ role: m.role, content: m.content })),
    ...namedModel(defaultModel()),
  });
  rememberModel(s.id, defaultModel());
  await loadSessions();
  await openSession(s.id);
}

export function exportSession() {
  const s = current.value;
  const data = {
    format: "kvchat.session",
    version: 1,
    title: s.title,
    system_prompt: s.system_prompt,
    sampling: s.sampling,
    messages: s.messages.map((m) => ({ role: m.role, content: m.content, status: m.status })),
  };
  const blob = new Blob([JSON.stringify(data, null, 2)], { type: "application/json" });
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = `${(s.title || "chat").replace(/[^\w.-]+/g, "_")}.json`;
  a.click();
  URL.revokeObjectURL(a.href);
}
