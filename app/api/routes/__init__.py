"""One module per group of routes (OpenAI, sessions and their turns, media, tokens, server state,
collections, documents, search)."""
