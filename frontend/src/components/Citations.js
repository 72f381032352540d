// Citations under an answer: numbered chips that open the cited passage with file and page.
import { useEffect, useRef, useState } from "preact/hooks";
import { html } from "../html.js";

export function Citations({ citations }) {
  const [open, setOpen] = useState(null);
  const passage = useRef(null);
  useEffect(() => passage.current?.focus(), [open]); // keyboard users land on the passage
  if (!citations?.length) return null;
  const c = open === null ? null : citations[open];
  return html`<div class="citations">
    <span class="label">Sources:</span>
    ${citations.map(
      (x, i) => html`<button class="chip" aria-expanded=${open === i} onClick=${() => setOpen(open === i ? null : i)}
          title=${`${x.filename}${x.page != null ? `, p. ${x.page}` : ""}`}>
        [${x.index ?? i + 1}] ${x.filename}${x.page != null ? ` p. ${x.page}` : ""}
      </button>`,
    )}
    ${c &&
    html`<div class="passage" role="dialog" tabindex="-1" ref=${passage} aria-label=${`Source ${c.index ?? open + 1}`}
        onKeyDown=${(e) => e.key === "Escape" && setOpen(null)}>
      <div class="passage-head">
        <strong>[${c.index ?? open + 1}] ${c.filename}</strong>
        ${c.page != null && html`<span>page ${c.page}</span>`}
        ${c.score != null && html`<span>relevance ${Number(c.score).toFixed(2)}</span>`}
        <button class="icon" aria-label="Close passage" onClick=${() => setOpen(null)}>✕</button>
      </div>
      <blockquote>${c.text}</blockquote>
    </div>`}
  </div>`;
}
