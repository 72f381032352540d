// The conversation's system prompt and sampling (temperature, max tokens), and presets.
import { useState } from "preact/hooks";
import { html } from "../html.js";
import { DEFAULT_MAX_TOKENS, presets, savePreset } from "../presets.js";
import { current, notice, saveSettings, showError } from "../state.js";

export function SettingsPanel() {
  const s = current.value;
  const [system, setSystem] = useState(s.system_prompt || "");
  const [temperature, setTemperature] = useState(s.sampling.temperature ?? 0.8);
  const [maxTokens, setMaxTokens] = useState(s.sampling.max_tokens ?? DEFAULT_MAX_TOKENS);
  const [, redraw] = useState(0);
  const apply = (p) => {
    setSystem(p.system_prompt);
    setTemperature(p.temperature);
    setMaxTokens(p.max_tokens);
    localStorage.setItem("preset", p.name);
  };
  const submit = async (e) => {
    e.preventDefault();
    const sampling = { ...s.sampling, temperature: Number(temperature), max_tokens: Number(maxTokens) };
    try {
      await saveSettings(s.id, system || null, sampling);
      notice.value = { kind: "info", text: "Settings saved; they apply from the next message." };
    } catch (err) {
      showError(err);
    }
  };
  const saveAs = () => {
    const name = prompt("Preset name");
    if (!name) return;
    savePreset({ name, system_prompt: system, temperature: Number(temperature), max_tokens: Number(maxTokens) });
    redraw((n) => n + 1);
  };
  return html`<form class="settings" onSubmit=${submit} aria-label="Conversation settings">
    <h2>Settings</h2>
    <label>Preset
      <select onChange=${(e) => apply(presets()[e.target.selectedIndex - 1])}>
        <option>Choose a preset…</option>
        ${presets().map((p) => html`<option>${p.name}</option>`)}
      </select>
    </label>
    <label>System prompt
      <textarea name="system_prompt" rows="5" value=${system} onInput=${(e) => setSystem(e.target.value)}></textarea>
    </label>
    <label>Temperature <output>${Number(temperature).toFixed(2)}</output>
      <input name="temperature" type="range" min="0" max="2" step="0.05" value=${temperature}
        onInput=${(e) => setTemperature(e.target.value)} />
    </label>
    <label>Max tokens
      <input name="max_tokens" type="number" min="1" max="8192" value=${maxTokens}
        onInput=${(e) => setMaxTokens(e.target.value)} required />
    </label>
    <p class="note">A new system prompt changes the start of every later prompt, so the next
      turn is evaluated afresh (nothing of this conversation is cached for it).</p>
    <div class="row">
      <button type="submit" class="primary">Save</button>
      <button type="button" onClick=${saveAs}>Save as preset</button>
    </div>
  </form>`;
}
