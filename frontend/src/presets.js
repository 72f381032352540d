// Presets of system prompt and sampling, kept in this browser; three built in.
const BUILT_IN = [
  { name: "Default", system_prompt: "You are a helpful assistant.", temperature: 0.8, max_tokens: 512 },
  { name: "Precise", system_prompt: "You are a precise assistant. Answer briefly and exactly.", temperature: 0.2, max_tokens: 256 },
  { name: "Creative", system_prompt: "You are a creative writer.", temperature: 1.1, max_tokens: 1024 },
];

export const DEFAULT_MAX_TOKENS = 512;

export function presets() {
  let own = [];
  try {
    own = JSON.parse(localStorage.getItem("presets") || "[]");
  } catch {
    own = [];
  }
  return [...BUILT_IN, ...own];
}

export function savePreset(preset) {
  const own = presets().slice(BUILT_IN.length).filter((p) => p.name !== preset.name);
  localStorage.setItem("presets", JSON.stringify([...own, preset]));
}

export function presetDefaults() {
  const name = localStorage.getItem("preset") || "Default";
  const p = presets().find((x) => x.name === name) || BUILT_IN[0];
  return { system_prompt: p.system_prompt, sampling: { temperature: p.temperature, max_tokens: p.max_tokens } };
}
