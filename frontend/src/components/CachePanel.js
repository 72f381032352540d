// Slots (which conversation holds which slot, cached tokens) and the cache tiers, from
// GET /slots and GET /cache, refreshed while the panel is open.
import { useEffect, useState } from "preact/hooks";
import { api } from "../api.js";
import { html } from "../html.js";
import { currentModel, sessions } from "../state.js";

const mib = (b) => `${(b / 1048576).toFixed(1)} MiB`;

export function CachePanel() {
  const [data, setData] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    let alive = true;
    let timer = null;
    const load = async () => {
      try {
        const model = currentModel.value ?? undefined; // router mode: this conversation's model
        const [slots, cache] = await Promise.all([api.slots(model), api.cache(model)]);
        if (alive) {
          setData({ slots, cache });
          setError(null);
        }
      } catch (e) {
        if (alive) setError(e.message);
      }
      if (alive) timer = setTimeout(load, 2000);
    };
    load();
    return () => {
      alive = false;
      clearTimeout(timer);
    };
  }, []);
  const title = (id) => sessions.value.find((s) => s.id === id)?.title || (id ? id.slice(0, 8) : "—");
  return html`<section class="cache-panel" aria-label="Slots and cache">
    <h2>Slots and cache${currentModel.value ? ` of ${currentModel.value}` : ""}</h2>
    ${error && html`<p class="error" role="alert">${error}</p>`}
    ${data &&
    html`<table class="slots">
        <caption>Slots</caption>
        <thead><tr><th>slot</th><th>state</th><th>conversation</th><th>cached tokens</th></tr></thead>
        <tbody>
          ${data.slots.map(
            (s) => html`<tr data-slot=${s.id}><td>${s.id}</td><td>${s.state}</td>
              <td>${title(s.session)}</td><td>${s.n_cached}</td></tr>`,
          )}
        </tbody>
      </table>
      <table class="tiers">
        <caption>Cache hits by tier</caption>
        <thead><tr><th>tier</th><th>hits</th><th>tokens</th></tr></thead>
        <tbody>
          ${Object.keys(data.cache.hits || {}).map(
            (k) => html`<tr><td>${k.replace("_", " ")}</td><td>${data.cache.hits[k]}</td><td>${data.cache.tokens?.[k] ?? ""}</td></tr>`,
          )}
        </tbody>
      </table>
      <dl class="tier-sizes">
        ${data.cache.host && html`<dt>host memory</dt>
          <dd>${data.cache.host.entries} entries, ${data.cache.host.tokens ?? "?"} tokens, ${mib(data.cache.host.bytes || 0)}</dd>`}
        <dt>disk</dt><dd>${data.cache.disk_entries} entries, ${mib(data.cache.disk_bytes || 0)}</dd>
        ${data.cache.encoder && html`<dt>image encoder</dt>
          <dd>${data.cache.encoder.entries} images, ${data.cache.encoder.hits} hits, ${data.cache.encoder.misses} misses</dd>`}
      </dl>`}
  </section>`;
}
