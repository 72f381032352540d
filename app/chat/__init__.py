"""Chat prompts: messages -> template -> token sequence (token-exact history, turn cache, images
of a chat), and what one generation produced (TurnRecorder). No HTTP here."""
