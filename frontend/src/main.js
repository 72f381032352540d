// kvchat's web chat: a single page on the server's API (sessions, media, documents, cache).
import "katex/dist/katex.min.css";
import "highlight.js/styles/github.css";
import "./style.css";
import { render } from "preact";
import { useEffect } from "preact/hooks";
import { CachePanel } from "./components/CachePanel.js";
import { Chat } from "./components/Chat.js";
import { DocumentsPanel } from "./components/DocumentsPanel.js";
import { ModelBanner, ModelPicker } from "./components/ModelPicker.js";
import { ModelsPanel } from "./components/ModelsPanel.js";
import { SettingsPanel } from "./components/SettingsPanel.js";
import { Sidebar } from "./components/Sidebar.js";
import { html } from "./html.js";
import { router } from "./models.js";
import {
  busy,
  current,
  exportSession,
  keyNeeded,
  notice,
  openSession,
  panel,
  sidebarOpen,
  start,
  applyKey,
} from "./state.js";

const THEMES = ["auto", "light", "dark"];

function applyTheme(theme) {
  document.documentElement.dataset.theme = theme;
  localStorage.setItem("theme", theme);
}

function Header() {
  const s = current.value;
  const toggle = (name) => (panel.value = panel.value === name ? null : name);
  const theme = localStorage.getItem("theme") || "auto";
  return html`<header class="top">
    <button class="icon menu" aria-label="Conversations" aria-expanded=${sidebarOpen.value}
      onClick=${() => (sidebarOpen.value = !sidebarOpen.value)}>☰</button>
    <h1>${s ? s.title || "Untitled" : "kvchat"}</h1>
    <${ModelPicker} />
    <div class="tools">
      ${s && html`<button onClick=${() => toggle("settings")} aria-pressed=${panel.value === "settings"}>Settings</button>
        <button onClick=${() => toggle("documents")} aria-pressed=${panel.value === "documents"}>Documents</button>
        <button onClick=${exportSession} disabled=${busy.value}>Export</button>`}
      ${router.value && html`<button onClick=${() => toggle("models")} aria-pressed=${panel.value === "models"}>Models</button>`}
      <button onClick=${() => toggle("cache")} aria-pressed=${panel.value === "cache"}>Cache</button>
      <button class="icon" aria-label=${`Theme: ${theme}`} title=${`Theme: ${theme}`}
        onClick=${() => applyTheme(THEMES[(THEMES.indexOf(theme) + 1) % 3])}>◐</button>
    </div>
  </header>`;
}

function Panel() {
  const p = panel.value;
  if (!p || (p !== "cache" && p !== "models" && !current.value)) return null;
  return html`<aside class="panel">
    <button class="icon close" aria-label="Close panel" onClick=${() => (panel.value = null)}>✕</button>
    ${p === "settings" && html`<${SettingsPanel} key=${current.value.id} />`}
    ${p === "documents" && html`<${DocumentsPanel} />`}
    ${p === "cache" && html`<${CachePanel} />`}
    ${p === "models" && html`<${ModelsPanel} />`}
  </aside>`;
}

function Notice() {
  const n = notice.value;
  if (!n) return null;
  return html`<div class=${`notice ${n.kind}`} role=${n.kind === "error" ? "alert" : "status"}>
    <span>${n.kind === "error" ? "Error: " : ""}${n.text}</span>
    <button class="icon" aria-label="Dismiss" onClick=${() => (notice.value = null)}>✕</button>
  </div>`;
}

function KeyForm() {
  if (!keyNeeded.value) return null;
  const submit = (e) => {
    e.preventDefault();
    applyKey(new FormData(e.target).get("key"));
  };
  return html`<form class="notice keyform" role="alert" onSubmit=${submit}>
    <span>${keyNeeded.value}</span>
    <input name="key" type="password" aria-label="API key" placeholder="API key" autocomplete="off" required />
    <button type="submit" class="primary">Use key</button>
  </form>`;
}

function App() {
  useEffect(() => {
    const fromHash = () => {
      const m = location.hash.match(/^#\/s\/([0-9a-f]+)$/);
      if (m && m[1] !== current.value?.id) openSession(m[1]);
    };
    start();
    addEventListener("hashchange", fromHash);
    return () => removeEventListener("hashchange", fromHash);
  }, []);
  return html`<div class="layout">
    <${Sidebar} />
    <main>
      <${Header} />
      <${KeyForm} />
      <${Notice} />
      <${ModelBanner} />
      <${Chat} />
    </main>
    <${Panel} />
  </div>`;
}

applyTheme(localStorage.getItem("theme") || "auto");
const root = document.getElementById("app");
root.textContent = ""; // the "Loading" placeholder
render(html`<${App} />`, root);
