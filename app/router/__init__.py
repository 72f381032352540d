"""Router mode (llama-server's `--models-dir`, `--models-preset`): one server in front of a model
server per model, loaded on request, the least recently used one unloaded past `--models-max`.
An unloaded model sleeps: its server keeps its process and its KV cache tiers, so a conversation
that comes back to it reuses what was computed (app/engine/core/model_sleep.py)."""
