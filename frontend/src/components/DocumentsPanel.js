// Collections and their documents (upload with progress and ingestion status, delete), each
// collection's mode (retrieval or full document, with its prefix's state), the toggle that makes
// this conversation answer from chosen collections, and how its document turns reuse the
// sources' KV (prefix or blend).
import { useEffect, useRef, useState } from "preact/hooks";
import { api, uploadDocument } from "../api.js";
import { html } from "../html.js";
import { current, ragCollections, ragReuse, setRagCollections, setRagReuse, showError } from "../state.js";
import { CollectionMode, prefixPending } from "./CollectionMode.js";
import { DocumentRow, UploadRow } from "./DocumentRow.js";

// What the file picker offers: the text formats, and scans and photos of pages (read by OCR).
const ACCEPT = [
  ".txt,.md,.markdown,.html,.htm,.pdf,text/plain,text/markdown,text/html,application/pdf,.docx",
  ".png,.jpg,.jpeg,.tif,.tiff,.webp,image/png,image/jpeg,image/tiff,image/webp",
].join(",");

function Collection({ c: listed, chosen, onToggle, onDeleted }) {
  const [c, setC] = useState(listed); // the collection as last read (mode, full prefix)
  const [docs, setDocs] = useState([]);
  const [uploads, setUploads] = useState([]); // [{name, fraction}]
  const load = () => api.documents(c.id).then((r) => setDocs(r.data), showError);
  // Only a server with full mode says a collection's mode; its prefix follows the documents.
  const reread = () => c.mode !== undefined && api.collection(c.id).then(setC, showError);
  useEffect(() => setC(listed), [listed]);
  useEffect(() => {
    load();
  }, [c.id]);
  const pending = docs.some((d) => d.status === "queued" || d.status === "processing");
  const computing = prefixPending(c);
  useEffect(() => {
    if (!pending && !computing) return undefined;
    // Ingestion and the full prefix run in the background: poll their status.
    const timer = setInterval(() => {
      if (pending) load();
      if (c.mode === "full") reread();
    }, 1000);
    return () => clearInterval(timer);
  }, [pending, computing, c.id, c.mode]);
  const ingesting = useRef(false);
  useEffect(() => {
    if (ingesting.current && !pending) reread(); // documents came in: the prefix moves on
    ingesting.current = pending;
  }, [pending]);
  const pickMode = async (mode) => {
    const before = c;
    setC({ ...c, mode });
    try {
      setC(await api.updateCollection(c.id, { mode }));
    } catch (e) {
      setC(before);
      showError(e);
    }
  };
  const upload = async (files) => {
    for (const file of files) {
      setUploads((u) => [...u, { name: file.name, fraction: 0 }]);
      const progress = (fraction) => setUploads((u) => u.map((x) => (x.name === file.name ? { ...x, fraction } : x)));
      try {
        await uploadDocument(c.id, file, progress);
      } catch (e) {
        showError(e);
      } finally {
        setUploads((u) => u.filter((x) => x.name !== file.name));
        load();
      }
    }
  };
  const remove = async (d) => {
    if (!confirm(`Delete ${d.filename}?`)) return;
    await api.deleteDocument(d.id).catch(showError);
    load();
    reread();
  };
  return html`<li class="collection" data-id=${c.id}>
    <div class="collection-head">
      <label><input type="checkbox" checked=${chosen} onChange=${(e) => onToggle(c.id, e.target.checked)} />
        Answer from <strong>${c.name}</strong></label>
      <button class="icon" aria-label=${`Delete collection ${c.name}`}
        onClick=${() => confirm(`Delete collection ${c.name}?`) && api.deleteCollection(c.id).then(onDeleted, showError)}>✕</button>
    </div>
    <${CollectionMode} c=${c} onPick=${pickMode} />
    <ul class="documents">
      ${docs.map((d) => html`<${DocumentRow} key=${d.id} d=${d} onDelete=${remove} />`)}
      ${uploads.map((u) => html`<${UploadRow} key=${u.name} u=${u} />`)}
    </ul>
    <label class="button">Upload documents
      <input type="file" multiple hidden accept=${ACCEPT}
        onChange=${(e) => (upload([...e.target.files]), (e.target.value = ""))} />
    </label>
  </li>`;
}

export function DocumentsPanel() {
  const s = current.value;
  const [collections, setCollections] = useState(null);
  const [missing, setMissing] = useState(false);
  const [chosen, setChosen] = useState(ragCollections(s.id));
  const [reuse, setReuse] = useState(ragReuse(s.id));
  const load = () =>
    api.collections().then(
      (r) => setCollections(r.data),
      (e) => (e.status === 404 ? setMissing(true) : showError(e)),
    );
  useEffect(() => {
    load();
    setChosen(ragCollections(s.id));
    setReuse(ragReuse(s.id));
  }, [s.id]);
  const toggle = (id, on) => {
    const next = on ? [...new Set([...chosen, id])] : chosen.filter((x) => x !== id);
    setRagCollections(s.id, next);
    setChosen(next);
  };
  const pickReuse = (mode) => {
    setRagReuse(s.id, mode);
    setReuse(mode);
  };
  const create = async (e) => {
    e.preventDefault();
    const name = new FormData(e.target).get("name").trim();
    if (!name) return;
    e.target.reset();
    await api.createCollection(name).catch(showError);
    load();
  };
  if (missing) return html`<section class="docs-panel"><h2>Documents</h2><p>This server has no documents API.</p></section>`;
  return html`<section class="docs-panel" aria-label="Documents">
    <h2>Documents</h2>
    <p class="note">Checked collections are searched for every message of this conversation; the
      answer cites the passages it used. A collection in <em>Full document</em> mode goes whole
      before every question instead: computed once, then cached. Scans and photos of pages are
      read by OCR.</p>
    <label>Reuse of the sources' cache
      <select name="kv_reuse" value=${reuse} onChange=${(e) => pickReuse(e.target.value)}>
        <option value="">server default</option>
        <option value="prefix">prefix (exact)</option>
        <option value="blend">blend (approximate)</option>
      </select>
    </label>
    <form class="row" onSubmit=${create}>
      <input name="name" aria-label="New collection name" placeholder="New collection" />
      <button type="submit">Create</button>
    </form>
    <ul class="collections">
      ${(collections || []).map(
        (c) => html`<${Collection} key=${c.id} c=${c} chosen=${chosen.includes(c.id)} onToggle=${toggle} onDeleted=${load} />`,
      )}
    </ul>
  </section>`;
}
