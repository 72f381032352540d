// Under each reply: prompt tokens, cached tokens as a bar split by where they came from, time
// to first token, generation speed and the prefill time the cache saved.
import { html } from "../html.js";

const SOURCES = [
  ["own_slot", "own slot"],
  ["other_slot", "other slot"],
  ["host", "host memory"],
  ["disk", "disk"],
];

const fmtMs = (ms) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${Math.round(ms)} ms`);

export function CacheBar({ message, prefillRate }) {
  const usage = message.usage;
  const t = message.timings;
  if (!usage) return null;
  const prompt = usage.prompt_tokens || 0;
  const cached = usage.prompt_tokens_details?.cached_tokens || 0;
  const sources = t?.cache_sources || {};
  const rate = prefillRate || t?.prompt_per_second || 0;
  const saved = rate > 0 ? (1000 * cached) / rate : null;
  const pct = (n) => (prompt ? (100 * n) / prompt : 0);
  const source = SOURCES.find(([k]) => sources[k] > 0);
  return html`<div class="cachebar" data-prompt=${prompt} data-cached=${cached} data-completion=${usage.completion_tokens}
      data-source=${source ? source[0] : "none"}>
    <div class="bar" role="img"
      aria-label=${`${cached} of ${prompt} prompt tokens from cache${source ? ` (${source[1]})` : ""}`}>
      ${SOURCES.map(([k]) =>
        sources[k] > 0 ? html`<span class=${`seg ${k}`} style=${`width:${pct(sources[k])}%`}></span>` : null,
      )}
    </div>
    <div class="figures">
      <span>${prompt} prompt tokens</span>
      <span class="cached">${cached} cached${source ? ` (${source[1]})` : ""}, ${prompt - cached} fresh</span>
      ${t && html`<span title="time to first token: prompt evaluation on the server">TTFT ${fmtMs(t.prompt_ms)}</span>`}
      ${t && t.predicted_n > 0 && html`<span>${t.predicted_per_second.toFixed(1)} tok/s</span>`}
      ${saved !== null && cached > 0 &&
        html`<span class="saved" title=${`cached tokens at the measured prefill rate of ${rate.toFixed(0)} tokens/s`}>
          saved ≈ ${fmtMs(saved)} prefill</span>`}
    </div>
  </div>`;
}
