// Router mode: a server started with --models-dir or --models-preset (llama-server's router)
// serves several models, one server per model, loaded on request. GET /props says so
// (`role: "router"`); GET /models lists the models with their status. Each conversation has its
// model (the session's `model` where the server stores one, else this browser's memory), new
// conversations start on the model picked last, and every request names a model.
//
// A single-model server has none of this: `router` stays false and only GET /props is asked.
import { signal } from "@preact/signals";
import { ApiError, call, routing } from "./api.js";

export const router = signal(false);
// [{id, status: "loaded"|"loading"|"unloaded"|"failed", reason, inputs, loadSeconds}]
export const models = signal([]);
export const waiting = signal(0); // requests naming a model whose answer has not started
export const maxLoaded = signal(null); // at most this many loaded at once (/props max_instances)

const LAST = "kvchat.model"; // the model picked last
const PREFIX = "model:"; // + session id: that conversation's model, in this browser
const POLL_MS = 500; // while a request waits or a model loads
const REFRESH_MS = 10000; // otherwise, while the page is shown (another client may load one)

function storedPicks() {
  const out = {};
  for (let i = 0; i < localStorage.length; i++) {
    const k = localStorage.key(i);
    if (k?.startsWith(PREFIX)) out[k.slice(PREFIX.length)] = localStorage.getItem(k);
  }
  return out;
}

const picks = signal(storedPicks()); // session id -> model, as kept in localStorage

const shape = (m) => ({
  id: m.id,
  status: m.status?.value || "unloaded",
  reason: m.status?.reason || null,
  inputs: m.architecture?.input_modalities || ["text"],
  loadSeconds: m.load_seconds ?? null,
});

export const modelInfo = (id) => models.value.find((m) => m.id === id) || null;
const usable = (m) => m.status !== "failed";

// First load (and again once an API key is given): is the server a router, and its models.
export async function detectRouter() {
  let props = null;
  try {
    props = await call("GET", "props", undefined, { model: null });
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) throw e; // start() asks for a key
  }
  router.value = props?.role === "router";
  if (!router.value) return;
  maxLoaded.value = props.max_instances ?? null;
  routing.watch = watch;
  routing.failed = async () => (await refreshModels(), readModel(currentModel() ?? defaultModel()));
  routing.model = () => readModel(currentModel() ?? defaultModel());
  await refreshModels();
  if (!refresher) refresher = setInterval(() => document.hidden || refreshModels(), REFRESH_MS);
}

let refresher = null;
let currentModel = () => null;

// The open conversation's model, as state.js knows it.
export function followConversation(get) {
  currentModel = get;
}

// A list asked for before the page learnt something newer (setStatus) is not taken: it may say
// what was true before.
let learnt = 0;

export async function refreshModels() {
  const asked = learnt;
  try {
    const list = (await call("GET", "models", undefined, { model: null })).data.map(shape);
    if (asked === learnt) models.value = list;
  } catch {
    /* the list stays as it was; the next poll asks again */
  }
}

// Polls GET /models (the router answers it itself, at once) while a request waits or a model
// loads, so the UI shows a load as it happens; once more when that is over.
let polling = false;
async function poll() {
  if (polling) return;
  polling = true;
  try {
    for (;;) {
      await refreshModels();
      if (!waiting.value && !models.value.some((m) => m.status === "loading")) break;
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  } finally {
    polling = false;
  }
}

// A request that names `model`, until its answer starts. An answer from the model's server
// says the model is loaded now, whatever the last poll saw: what the page asks next names it.
function watch(promise, model) {
  waiting.value++;
  poll();
  return promise
    .then((resp) => {
      if (resp.ok) setStatus(model, "loaded");
      return resp;
    })
    .finally(() => {
      waiting.value--;
    });
}

function setStatus(model, status) {
  learnt++;
  models.value = models.value.map((m) => (m.id === model ? { ...m, status, reason: null } : m));
}

// The model new conversations start on: the one picked last, else a loaded one, else the
// first that has not failed.
export function defaultModel() {
  const list = models.value;
  const last = localStorage.getItem(LAST);
  if (last && (!list.length || modelInfo(last))) return last;
  const loaded = list.find((m) => m.status === "loaded");
  return (loaded || list.find(usable) || list[0])?.id ?? null;
}

// A conversation's model: the session's own (a server that stores it), else this browser's
// memory, else the default. Null on a single-model server.
export function modelOf(session) {
  if (!router.value || !session) return null;
  if (typeof session.model === "string" && session.model) return session.model;
  return picks.value[session.id] || defaultModel();
}

export function rememberModel(sessionId, model) {
  if (!model) return;
  localStorage.setItem(PREFIX + sessionId, model);
  picks.value = { ...picks.value, [sessionId]: model };
}

export function forgetModel(sessionId) {
  localStorage.removeItem(PREFIX + sessionId);
  const { [sessionId]: _, ...rest } = picks.value;
  picks.value = rest;
}

// The model a request names when it runs none (sessions, media, documents: every model's
// server answers them from the one database): the conversation's if it is loaded or loading,
// else a loaded one, else one loading, so that reading never unloads a model; else the
// conversation's; else any that has not failed.
export function readModel(own) {
  const list = models.value;
  if (["loaded", "loading"].includes(modelInfo(own)?.status)) return own;
  const ready = list.find((m) => m.status === "loaded") || list.find((m) => m.status === "loading");
  if (ready) return ready.id;
  if (own && (!list.length || (modelInfo(own) && usable(modelInfo(own))))) return own;
  return list.find(usable)?.id ?? own ?? null;
}

// The user picked `model` for a conversation: remembered (for it and for new conversations)
// and loaded now if it is not, so the next turn does not wait for it.
export async function pickModel(sessionId, model) {
  localStorage.setItem(LAST, model);
  if (sessionId) rememberModel(sessionId, model);
  await refreshModels(); // the list may be older than the last load or unload
  if (modelInfo(model)?.status === "unloaded") await loadModel(model);
}

// POST /models/load (a failed model is tried again), then the load is watched until it ends.
// The model counts as loading from now: what the page asks meanwhile names it, not the model
// its load may unload.
export async function loadModel(model) {
  setStatus(model, "loading");
  try {
    await call("POST", "models/load", { model }, { model: null });
  } catch (e) {
    if (!/already running/.test(e.message)) throw e;
  } finally {
    await refreshModels();
    poll();
  }
}

export async function unloadModel(model) {
  try {
    await call("POST", "models/unload", { model }, { model: null });
  } finally {
    poll();
  }
}
