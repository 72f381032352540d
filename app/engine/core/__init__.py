"""The engine's loop and its slots: `EngineLoop` (the engine thread), the parts it is built from
(`engine_parts`), inbox and outbox, arrival tickets and the quiet gate, the `Stepper` (one step:
plan, llama_decode, sample), the scheduler and its slots, request defaults, the text stream."""
