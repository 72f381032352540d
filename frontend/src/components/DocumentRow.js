// One document of a collection: its ingestion status, the pages read by OCR (pages without a
// text layer, a photo of a page) and, as a warning, the pages OCR could not read: the server
// reports them instead of failing the whole document, and what they held is not in the answers.
// Before it is a document, a file being uploaded: its name and the upload's progress.
import { html } from "../html.js";

// [1, 2, 3, 5] -> "pages 1–3, 5"; [4] -> "page 4".
export function pagesText(pages) {
  const sorted = [...new Set(pages)].sort((a, b) => a - b);
  const runs = [];
  for (const p of sorted) {
    const last = runs[runs.length - 1];
    if (last && p === last[1] + 1) last[1] = p;
    else runs.push([p, p]);
  }
  const text = runs.map(([a, b]) => (a === b ? `${a}` : `${a}–${b}`)).join(", ");
  return `${sorted.length === 1 ? "page" : "pages"} ${text}`;
}

function statusOf(d) {
  const p = d.progress || {};
  const status = d.status === "processing" && p.chunks_total ? `processing ${p.chunks_done}/${p.chunks_total}` : d.status;
  return `${status}${d.status === "ready" && d.n_chunks != null ? `, ${d.n_chunks} chunks` : ""}`;
}

function Ocr({ d }) {
  const read = d.ocr_pages || [];
  const failed = d.ocr_failed || [];
  if (!read.length && !failed.length) return null;
  return html`<div class="ocr">
    ${read.length > 0 && html`<span class="ocr-pages" title="read by OCR: these pages have no text layer">OCR: ${pagesText(read)}</span>`}
    ${failed.length > 0 &&
    html`<ul class="ocr-failed" aria-label=${`Pages of ${d.filename} OCR could not read`}>
      ${failed.map((f) => html`<li class="warning" key=${f.page}>⚠ page ${f.page} not read${f.reason ? `: ${f.reason}` : ""}</li>`)}
    </ul>`}
  </div>`;
}

export function DocumentRow({ d, onDelete }) {
  return html`<li class="document" data-status=${d.status}>
    <span class="name">${d.filename}</span>
    <span class=${`status ${d.status}`}>${statusOf(d)}</span>
    ${d.error && html`<span class="error">${d.error}</span>`}
    <button class="icon" aria-label=${`Delete ${d.filename}`} onClick=${() => onDelete(d)}>✕</button>
    <${Ocr} d=${d} />
  </li>`;
}

export function UploadRow({ u }) {
  return html`<li class="document uploading">
    <span class="name">${u.name}</span>
    <progress max="1" value=${u.fraction} aria-label=${`Uploading ${u.name}`}></progress>
  </li>`;
}
