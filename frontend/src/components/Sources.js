// Under a document turn's user message: the sources the server retrieved and put before the
// user's words in the prompt, folded; opened, every passage with its file, page and relevance.
import { html } from "../html.js";

const where = (c) => `${c.filename}${c.page != null ? ` p. ${c.page}` : ""}`;

export function Sources({ citations }) {
  if (!citations?.length) return null;
  const n = citations.length;
  return html`<details class="sources">
    <summary>${n} ${n === 1 ? "source" : "sources"}: ${citations.map((c, i) => `[${c.index ?? i + 1}] ${where(c)}`).join(", ")}</summary>
    ${citations.map(
      (c, i) => html`<div class="passage" key=${c.chunk_id ?? i} aria-label=${`Source ${c.index ?? i + 1}`}>
        <div class="passage-head">
          <strong>[${c.index ?? i + 1}] ${c.filename}</strong>
          ${c.page != null && html`<span>page ${c.page}</span>`}
          ${c.score != null && html`<span>relevance ${Number(c.score).toFixed(2)}</span>`}
        </div>
        <blockquote>${c.text}</blockquote>
      </div>`,
    )}
  </details>`;
}
