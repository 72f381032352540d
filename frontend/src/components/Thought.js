// A reply's thought (the model's `<think>` block, which the server returns apart as
// `reasoning_content`), folded above the answer; open while it streams and no answer came yet.
import { html } from "../html.js";

export function Thought({ text, streaming, answered }) {
  if (!text) return null;
  return html`<details class="thought" open=${streaming && !answered}>
    <summary>${streaming && !answered ? "Thinking…" : "Thought"}</summary>
    <div class="plain">${text}</div>
  </details>`;
}
