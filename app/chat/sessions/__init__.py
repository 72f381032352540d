"""Stored conversations as prompts: token-exact history, the turn cache, a session's lookup, and
turns, replies and responses as stored."""
