"""KV reuse and room: `PrefixReuse` (slots, then the host and disk tiers through `kv_tiers`),
KV compaction, room for a step (`kv_room`), state shift, slot files."""
