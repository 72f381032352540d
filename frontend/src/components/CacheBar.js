// Under each reply: prompt tokens, cached tokens as a bar split by where they came from (a
// cached prefix: own slot, other slot, host memory, disk; or chunk KV placed by blend), time to
// first token, generation speed and the prefill time the cache saved. A document turn that
// asked for blend says whether it blended or fell back to prefix reuse, and why.
import { html } from "../html.js";

const PREFIX_SOURCES = [
  ["own_slot", "own slot"],
  ["other_slot", "other slot"],
  ["host", "host memory"],
  ["disk", "disk"],
];
const SOURCES = [...PREFIX_SOURCES, ["chunk", "blended chunks"]];

const fmtMs = (ms) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${Math.round(ms)} ms`);

// `timings.kv_reuse` is there only when the turn asked for blend.
function Reuse({ t, blended }) {
  if (!t?.kv_reuse) return null;
  if (t.kv_reuse === "blend") {
    return html`<span class="reuse" data-kv-reuse="blend"
        title="chunk KV placed at its position in the prompt, the first tokens of each chunk recomputed">
      blend: ${blended} tokens from chunk KV</span>`;
  }
  return html`<span class="reuse" data-kv-reuse=${t.kv_reuse}>
    ${t.kv_reuse} reuse${t.kv_reuse_reason ? ` (blend fell back: ${t.kv_reuse_reason})` : ""}</span>`;
}

export function CacheBar({ message, prefillRate }) {
  const usage = message.usage;
  const t = message.timings;
  if (!usage) return null;
  const prompt = usage.prompt_tokens || 0;
  const cached = usage.prompt_tokens_details?.cached_tokens || 0;
  const sources = t?.cache_sources || {};
  const blended = sources.chunk || 0; // of `cached`: the rest is a cached prefix
  const rate = prefillRate || t?.prompt_per_second || 0;
  const saved = rate > 0 ? (1000 * cached) / rate : null;
  const pct = (n) => (prompt ? (100 * n) / prompt : 0);
  const source = PREFIX_SOURCES.find(([k]) => sources[k] > 0);
  const label = blended > 0
    ? [source && `${cached - blended} ${source[1]}`, `${blended} blended`].filter(Boolean).join(", ")
    : source && source[1];
  return html`<div class="cachebar" data-prompt=${prompt} data-cached=${cached} data-completion=${usage.completion_tokens}
      data-source=${source ? source[0] : "none"} data-blended=${blended} data-kv-reuse=${t?.kv_reuse || "none"}>
    <div class="bar" role="img"
      aria-label=${`${cached} of ${prompt} prompt tokens from cache${label ? ` (${label})` : ""}`}>
      ${SOURCES.map(([k]) =>
        sources[k] > 0 ? html`<span class=${`seg ${k}`} style=${`width:${pct(sources[k])}%`}></span>` : null,
      )}
    </div>
    <div class="figures">
      <span>${prompt} prompt tokens</span>
      <span class="cached">${cached} cached${label ? ` (${label})` : ""}, ${prompt - cached} fresh</span>
      <${Reuse} t=${t} blended=${blended} />
      ${t && html`<span title="time to first token: prompt evaluation on the server">TTFT ${fmtMs(t.prompt_ms)}</span>`}
      ${t && t.predicted_n > 0 && html`<span>${t.predicted_per_second.toFixed(1)} tok/s</span>`}
      ${saved !== null && cached > 0 &&
        html`<span class="saved" title=${`cached tokens at the measured prefill rate of ${rate.toFixed(0)} tokens/s`}>
          saved ≈ ${fmtMs(saved)} prefill</span>`}
    </div>
  </div>`;
}
