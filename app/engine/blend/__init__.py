"""Documents' chunk KV placed into a prompt: `ChunkBlend` and the per-model quality gate
(`blend_gate`); the plan a request carries is app/engine/blend_plan.py."""
