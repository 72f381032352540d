"""Names of KV reuse, typed: where a request's cached prefix came from (`CacheSource`; what
prefix reuse found: `PrefixMatch`) and how its prompt reuses KV (`KvReuse`). String-valued, so
the replies' JSON, the metrics' labels and the stored collections read as the bare names did."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class CacheSource(StrEnum):
    """Where the prefix `PrefixReuse.prepare` put into a slot came from, cheapest first."""

    OWN_SLOT = "own_slot"  # the slot's own KV: nothing to do
    OTHER_SLOT = "other_slot"  # another slot's cells, shared
    HOST = "host"  # a host-memory copy, restored
    DISK = "disk"  # a file of the disk tier, read and restored
    NONE = "none"  # nothing cached: the whole prompt is computed


# The tiers that hold a prefix (`NONE` has no cached tokens to count), in the order above.
TIERS: tuple[CacheSource, ...] = tuple(s for s in CacheSource if s is not CacheSource.NONE)


@dataclass(frozen=True, slots=True)
class PrefixMatch:
    """What `PrefixReuse.prepare` put into a slot (as SGLang's MatchResult): the prompt's first
    `cached` tokens, from `source`."""

    cached: int = 0
    source: CacheSource = CacheSource.NONE


class KvReuse(StrEnum):
    """How a request with documents reuses KV (`--kv-reuse`, a collection's or a request's
    `kv_reuse`)."""

    PREFIX = "prefix"  # the longest cached prefix only
    BLEND = "blend"  # and each chunk's own KV where the prompt places it (chunk_blend.py)
