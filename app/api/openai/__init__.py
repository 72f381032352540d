"""OpenAI's API: /v1/chat/completions, /v1/completions, /v1/models and /v1/embeddings, their
schemas and reply shapes (chat and text completion objects, tool calls)."""
