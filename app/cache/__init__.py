"""KV-cache tiers and their index: the radix prefix index, host-memory and disk tiers, state
files and the vision-encoder output cache. No llama.cpp calls here; the engine moves the bytes."""
