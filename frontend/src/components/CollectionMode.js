// A collection's mode: retrieval (each question gets the passages a search finds) or full
// document (the whole collection, in its stable order, before every question: its prefix is
// computed once in the background and then reused by every question). In full mode the state
// of that prefix shows as the server reports it (`full_prefix`); a server without full mode
// (no `mode` in its collections) shows neither.
import { html } from "../html.js";

const MODES = [
  ["retrieval", "Retrieval", "each question gets the passages a search finds"],
  ["full", "Full document", "the whole collection goes before every question; its prefix is computed once and cached"],
];

const count = (n) => Number(n || 0).toLocaleString("en-US");

// The server is still working on the prefix: the panel polls the collection until it is done.
export const prefixPending = (c) => c.mode === "full" && ["queued", "computing"].includes(c.full_prefix?.state);

export function prefixText(fp) {
  const tokens = fp.tokens ? `${count(fp.tokens)} tokens, ` : "";
  switch (fp.state) {
    case "empty":
      return "full prefix: empty (no document ready yet)";
    case "queued":
      return `full prefix: ${tokens}queued…`;
    case "computing":
      return fp.cached_tokens && fp.tokens
        ? `full prefix: computing… ${count(fp.cached_tokens)} of ${count(fp.tokens)} tokens`
        : `full prefix: ${tokens}computing…`;
    case "cached":
      return `full prefix: ${tokens}cached`;
    case "too_long":
      return `full prefix: too long for the context (${count(fp.tokens)} > ${count(fp.n_ctx)} tokens)`;
    case "failed":
      return `full prefix: failed${fp.error ? `: ${fp.error}` : ""}`;
    default:
      return `full prefix: ${fp.state}`;
  }
}

function PrefixStatus({ fp }) {
  if (!fp) return null;
  const computing = fp.state === "computing" && fp.tokens > 0;
  return html`<p class="prefix" data-state=${fp.state} role="status">
    ${prefixText(fp)}
    ${computing && html`<progress max=${fp.tokens} value=${fp.cached_tokens || 0} aria-label="Full prefix computed"></progress>`}
  </p>`;
}

export function CollectionMode({ c, onPick }) {
  if (c.mode === undefined) return null;
  return html`<div class="collection-mode">
    <div class="mode-switch" role="radiogroup" aria-label=${`Mode of ${c.name}`}>
      ${MODES.map(
        ([value, label, title]) => html`<label title=${title}>
          <input type="radio" name=${`mode-${c.id}`} value=${value} checked=${c.mode === value}
            onChange=${() => c.mode !== value && onPick(value)} /> ${label}</label>`,
      )}
    </div>
    ${c.mode === "full" && html`<${PrefixStatus} fp=${c.full_prefix} />`}
  </div>`;
}
