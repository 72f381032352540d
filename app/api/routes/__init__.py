"""One module per group of routes (OpenAI, sessions, media, tokens, server state)."""
