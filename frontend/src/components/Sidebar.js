// Conversations: create, switch, rename and delete; the newest activity first.
import { useState } from "preact/hooks";
import { html } from "../html.js";
import { modelOf, router } from "../models.js";
import {
  busy,
  currentId,
  deleteSession,
  importSession,
  newSession,
  openSession,
  renameSession,
  sessions,
  showError,
  sidebarOpen,
} from "../state.js";

function SessionItem({ s }) {
  const [editing, setEditing] = useState(false);
  const active = s.id === currentId.value;
  const title = s.title || "Untitled";
  if (editing) {
    const done = async (e) => {
      e.preventDefault();
      const value = new FormData(e.target).get("title").trim();
      setEditing(false);
      if (value && value !== s.title) await renameSession(s.id, value).catch(showError);
    };
    return html`<li class="session editing">
      <form onSubmit=${done}>
        <input name="title" aria-label="New title" value=${title} autofocus
          onKeyDown=${(e) => e.key === "Escape" && setEditing(false)} />
        <button type="submit">Save</button>
      </form>
    </li>`;
  }
  return html`<li class=${`session${active ? " active" : ""}`} data-id=${s.id}>
    <button class="open" aria-current=${active ? "page" : undefined} disabled=${busy.value && !active}
      onClick=${() => openSession(s.id)}>
      <span class="title">${title}</span>
      <span class="count">${s.n_messages} msg${router.value ? html` · <span class="model">${modelOf(s)}</span>` : ""}</span>
    </button>
    <button class="icon" title="Rename" aria-label=${`Rename ${title}`} onClick=${() => setEditing(true)}>✎</button>
    <button class="icon" title="Delete" aria-label=${`Delete ${title}`} disabled=${busy.value && active}
      onClick=${() => confirm(`Delete "${title}"?`) && deleteSession(s.id).catch(showError)}>✕</button>
  </li>`;
}

export function Sidebar() {
  const onImport = async (e) => {
    const file = e.target.files[0];
    e.target.value = "";
    if (file) await importSession(file).catch(showError);
  };
  return html`<nav class=${`sidebar${sidebarOpen.value ? " open" : ""}`} aria-label="Conversations"
      onKeyDown=${(e) => e.key === "Escape" && (sidebarOpen.value = false)}>
    <div class="sidebar-head">
      <button class="icon close-sidebar" aria-label="Close conversations" onClick=${() => (sidebarOpen.value = false)}>✕</button>
      <button class="primary" onClick=${() => newSession().catch(showError)} disabled=${busy.value}>+ New chat</button>
      <label class="button" title="Import a conversation exported as JSON">
        Import<input type="file" accept="application/json,.json" hidden onChange=${onImport} />
      </label>
    </div>
    <ul class="sessions">
      ${sessions.value.map((s) => html`<${SessionItem} key=${s.id} s=${s} />`)}
    </ul>
  </nav>`;
}
