// Router mode: every model the server serves, with its status (a failed one with the reason),
// what it takes in, and buttons to use it here, load or unload it. Refreshed while open.
import { useEffect } from "preact/hooks";
import { html } from "../html.js";
import { loadModel, maxLoaded, models, refreshModels, unloadModel } from "../models.js";
import { busy, chooseModel, current, currentModel, showError } from "../state.js";
import { statusText } from "./ModelPicker.js";

const REFRESH_MS = 2000;

function ModelRow({ m }) {
  const here = m.id === currentModel.value;
  const running = m.status === "loaded" || m.status === "loading";
  return html`<li class=${`model${here ? " here" : ""}`} data-model=${m.id} data-status=${m.status}>
    <div class="model-head">
      <span class="name">${m.id}</span>
      <span class="model-status" data-status=${m.status}>${statusText(m)}</span>
    </div>
    <div class="note">
      ${m.inputs.join(", ")} in${m.loadSeconds != null && m.status === "loaded" ? ` · loaded in ${m.loadSeconds.toFixed(1)} s` : ""}
    </div>
    ${m.reason && html`<div class="error reason">${m.reason}</div>`}
    <div class="row">
      ${current.value && html`<button disabled=${here || busy.value} aria-label=${`Use ${m.id} in this conversation`}
        onClick=${() => chooseModel(m.id)}>${here ? "In use here" : "Use here"}</button>`}
      ${running
        ? html`<button aria-label=${`Unload ${m.id}`} onClick=${() => unloadModel(m.id).catch(showError)}>Unload</button>`
        : html`<button aria-label=${`Load ${m.id}`} onClick=${() => loadModel(m.id).catch(showError)}>
            ${m.status === "failed" ? "Try again" : "Load"}</button>`}
    </div>
  </li>`;
}

export function ModelsPanel() {
  useEffect(() => {
    refreshModels();
    const timer = setInterval(refreshModels, REFRESH_MS);
    return () => clearInterval(timer);
  }, []);
  return html`<section class="models-panel" aria-label="Models">
    <h2>Models</h2>
    <p class="note">${[
      "A model loads when it is picked, or when a conversation on it sends a message.",
      maxLoaded.value ? `At most ${maxLoaded.value} at once: the one used least recently makes room.` : "",
      "An unloaded model keeps its conversations' cache for when it comes back.",
    ].filter(Boolean).join(" ")}</p>
    <ul class="models">
      ${models.value.map((m) => html`<${ModelRow} key=${m.id} m=${m} />`)}
    </ul>
  </section>`;
}
