"""What calls llama.cpp directly: `Model` (the only handle owner), batches, context parameters,
the vision projector (`Vision`) and the probabilities of sampled tokens."""
