// The open conversation: its history, the reply streaming now, and the composer.
import { useEffect, useRef } from "preact/hooks";
import { html } from "../html.js";
import { modelInfo } from "../models.js";
import { current, live } from "../state.js";
import { Composer } from "./Composer.js";
import { Message } from "./Message.js";

const contextTokens = (m) => (m?.usage ? m.usage.prompt_tokens + m.usage.completion_tokens : 0);

// The prefill rate measured on this conversation's turns that evaluated a real amount of
// prompt (tiny evaluations are dominated by fixed costs), else the best we have.
function prefillRate(messages) {
  const rates = messages
    .filter((m) => m.timings?.prompt_per_second > 0)
    .map((m) => [m.timings.prompt_n, m.timings.prompt_per_second]);
  const big = rates.filter(([n]) => n >= 32);
  const use = big.length ? big : rates;
  return use.length ? Math.max(...use.map(([, r]) => r)) : 0;
}

export function Chat() {
  const s = current.value;
  const end = useRef(null);
  const l = live.value;
  useEffect(() => end.current?.scrollIntoView({ block: "end" }), [s?.messages.length, l?.text]);
  if (!s) {
    return html`<section class="chat empty"><p>Pick a conversation or start a new chat.</p></section>`;
  }
  const messages = l && !l.user ? s.messages.slice(0, -1) : s.messages; // regenerate hides the old reply
  const measured = s.messages.filter((m) => m.usage);
  const total = contextTokens(measured[measured.length - 1]);
  const rate = prefillRate(s.messages);
  const lastReply = messages.length - 1;
  // Router mode: the turn waits while its model loads (or waits for room to load).
  const status = l?.status === "waiting" && l.model ? modelInfo(l.model)?.status : null;
  const loading = status === "loading" || status === "unloaded" ? l.model : null;
  return html`<section class="chat" aria-label="Conversation">
    <div class="messages" aria-busy=${l ? "true" : "false"}>
      ${s.system_prompt && html`<div class="system" title="System prompt">System: ${s.system_prompt}</div>`}
      ${messages.map((m, i) => {
        const before = measured.filter((x) => x.seq < m.seq);
        const givenUp = Math.max(0, total - contextTokens(before[before.length - 1]));
        return html`<${Message} key=${m.id} message=${m}
          isLastReply=${i === lastReply && m.role === "assistant"} givenUp=${givenUp} prefillRate=${rate} />`;
      })}
      ${l?.user && html`<${Message} key="pending" message=${{ ...l.user, citations: l.citations }} streaming=${true} />`}
      ${l && html`<${Message} key="live" streaming=${true} loading=${loading}
        message=${{ role: "assistant", content: l.text, reasoning_content: l.reasoning, citations: l.citations, status: "" }} />`}
      ${l?.ttftMs != null && html`<div class="live-figures" aria-hidden="true">
        first token after ${Math.round(l.ttftMs)} ms${l.pieces > 1
          ? ` · ${((1000 * (l.pieces - 1)) / Math.max(1, l.lastAt - l.firstAt)).toFixed(1)} tok/s`
          : ""}</div>`}
      <div class="sr-only" role="status">${l?.status === "waiting" ? (loading ? `Loading model ${loading}` : "Waiting for the reply") : ""}</div>
      <div ref=${end}></div>
    </div>
    <${Composer} />
  </section>`;
}
