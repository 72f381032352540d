// Tool calling in a session's history: the calls an assistant message made (each
// tool's name and its arguments, pretty-printed when they are JSON), and a tool result's call.
import { html } from "../html.js";

function pretty(args) {
  try {
    return JSON.stringify(JSON.parse(args), null, 2);
  } catch {
    return args; // not JSON: shown as the model wrote it
  }
}

export function ToolCalls({ calls }) {
  if (!calls || calls.length === 0) return null;
  return html`<div class="toolcalls">
    ${calls.map(
      (c) => html`<div class="toolcall" key=${c.id} data-call-id=${c.id}>
        <div class="toolname">Calls <code>${c.name}</code></div>
        <pre class="toolargs">${pretty(c.arguments)}</pre>
      </div>`,
    )}
  </div>`;
}

export function ToolResultOf({ callId }) {
  return callId ? html`<div class="toolfor">Result of <code>${callId}</code></div>` : null;
}
