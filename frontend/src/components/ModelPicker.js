// Router mode: the open conversation's model (a select in the header, each model with its
// status), and under the header what that model is doing: loading (a request waits for it),
// or failed, with the reason and a way to try again. Nothing on a single-model server.
import { html } from "../html.js";
import { loadModel, modelInfo, models, router } from "../models.js";
import { busy, chooseModel, current, currentModel, live, showError } from "../state.js";

export const STATUS = {
  loaded: "loaded",
  loading: "loading…",
  unloaded: "not loaded",
  failed: "failed",
};

export function statusText(info) {
  return info ? STATUS[info.status] || info.status : "not found";
}

export function ModelPicker() {
  if (!router.value || !current.value) return null;
  const model = currentModel.value;
  const info = modelInfo(model);
  const listed = models.value.some((m) => m.id === model);
  return html`<div class="model-pick">
    <select aria-label="Model" title="This conversation's model" value=${model} disabled=${busy.value}
      onChange=${(e) => chooseModel(e.target.value)}>
      ${!listed && model && html`<option value=${model}>${model} (not found)</option>`}
      ${models.value.map((m) => html`<option key=${m.id} value=${m.id}>${m.id} (${statusText(m)})</option>`)}
    </select>
    <span class="model-status" data-status=${info?.status || "missing"}
      title=${info?.reason || ""}>${statusText(info)}</span>
  </div>`;
}

// What the models are doing, when the user has to know: one loads (it was picked, or a request
// waits for it), or the conversation's model failed (why, and a way to try it again).
export function ModelBanner() {
  if (!router.value) return null;
  const model = currentModel.value;
  const info = modelInfo(model);
  const pendingTurn = live.value?.status === "waiting";
  if (info?.status === "failed") {
    const retry = () => loadModel(model).catch(showError);
    return html`<div class="notice model-banner failed" role="alert" data-model=${model}>
      <span>Model ${model} failed to load: <span class="reason">${info.reason || "no reason given"}</span></span>
      <button onClick=${retry}>Try again</button>
    </div>`;
  }
  // A turn waiting for its model says so in its own reply (Chat.js); other loads show here.
  const loading = models.value.find((m) => m.status === "loading" && !(pendingTurn && m.id === model));
  if (!loading) return null;
  return html`<div class="notice model-banner loading" role="status" data-model=${loading.id}>
    <span><span class="spinner" aria-hidden="true"></span>Loading model ${loading.id}…</span>
  </div>`;
}
