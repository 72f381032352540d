"""The typed names of KV reuse read, in JSON and in the timings, exactly as the bare names did."""

from __future__ import annotations

import json

from app.engine.events import Timings
from app.engine.reuse_kinds import TIERS, CacheSource, KvReuse, PrefixMatch


def test_the_names_are_the_strings_clients_and_metrics_see():
    assert [str(s) for s in CacheSource] == ["own_slot", "other_slot", "host", "disk", "none"]
    assert TIERS == (
        CacheSource.OWN_SLOT,
        CacheSource.OTHER_SLOT,
        CacheSource.HOST,
        CacheSource.DISK,
    )
    assert [str(m) for m in KvReuse] == ["prefix", "blend"]
    assert json.dumps({CacheSource.HOST: KvReuse.BLEND}) == '{"host": "blend"}'
    assert KvReuse("blend") is KvReuse.BLEND and CacheSource("disk") is CacheSource.DISK


def test_nothing_matched_is_no_tokens_from_no_source():
    assert PrefixMatch() == PrefixMatch(0, CacheSource.NONE)


def test_timings_json_names_the_source_and_the_mode_as_plain_strings():
    t = Timings(
        cache_n=30,
        prompt_n=5,
        cache_source=CacheSource.HOST,
        chunk_n=10,
        kv_reuse=KvReuse.BLEND,
        kv_reuse_agreement={"k": 4},
    )
    d = t.as_dict()
    assert d["cache_sources"] == {
        "own_slot": 0,
        "other_slot": 0,
        "host": 20,
        "disk": 0,
        "chunk": 10,
    }
    assert all(type(k) is str for k in d["cache_sources"])
    assert type(d["kv_reuse"]) is str and d["kv_reuse"] == "blend"
    assert d["kv_reuse_agreement"] == {"k": 4}
    fallback = Timings(kv_reuse=KvReuse.PREFIX, kv_reuse_reason="cache_prompt is off").as_dict()
    assert fallback["kv_reuse"] == "prefix" and "kv_reuse_agreement" not in fallback
    assert "kv_reuse" not in Timings().as_dict()
