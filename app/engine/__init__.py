"""llama.cpp serving: the model handle, slots, scheduler, sampler and prefix reuse, run by one
engine thread that owns every llama.cpp compute call.

The modules at this folder's root are the door: `Engine` and what its callers hand it or get back
(config, requests, sampling parameters, blend plans, tasks, events, streams, tokenizer views,
results). The subfolders are the engine's insides, imported by the engine alone (checked by
scripts/import_graph.py): `core` (the loop, slots, scheduler, stepper), `llama` (what calls
llama.cpp directly), `kv` (prefix reuse, cache tiers, compaction), `blend` (documents' chunk KV),
`speculation` (drafts).
"""
