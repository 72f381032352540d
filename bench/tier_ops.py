"""`python -m bench.tier_ops`: engine-thread time of KV tier moves against the raw llama.cpp copy.

    python -m bench.tier_ops [--model PATH] [--tokens 1400] [--repeats 20]

A slot holding ~1,400 tokens is saved and restored the way the server does it (PrefixReuse with a
host tier at steady state: full, so each save evicts an entry and reuses its buffer), side by
side with the floor: `llama_state_seq_get_data_ext` / `set_data_ext` into and from one buffer
that is used again and again. Also the way it was done before pooling (a fresh zero-filled
ctypes array, `bytes()`, a slice) for reference. Prints medians in ms and the ratios; the target
is save <= 1.5x raw get_data.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import time

import llama_cpp

from app.cache.host_cache import HostCache
from app.config_derived import packaged_model_path
from app.engine.core.scheduler import Scheduler
from app.engine.engine_config import EngineConfig
from app.engine.kv.prefix_reuse import PrefixReuse
from app.engine.llama.model import Model


def _old_save(model: Model, seq_id: int) -> bytes:
    """The save before pooling: fresh memory three times over."""
    size = model.state_size(seq_id)
    buf = (ctypes.c_uint8 * size)()
    written = llama_cpp.llama_state_seq_get_data_ext(model.ctx, buf, size, seq_id, 0)
    return bytes(buf)[:written]


def measure(model_path: str, n_tokens: int, repeats: int) -> dict[str, float]:
    model = Model(EngineConfig(model_path=model_path, n_ctx=4096, n_parallel=2))
    try:
        scheduler = Scheduler(2, 0.1)
        slot = scheduler.slots[0]
        text = "The river carried silt and stories down to the sea. " * 200
        tokens = model.tokenize(text)[:n_tokens]
        batch = model.new_batch()
        for start in range(0, len(tokens), model.n_batch):
            batch.clear()
            for i, t in enumerate(tokens[start : start + model.n_batch]):
                batch.add(t, start + i, 0, False)
            assert model.decode(batch) == 0
        batch.close()
        slot.cache.extend(tokens)
        size = model.state_size(0)

        raw_buf = bytearray(size)
        model.state_save_into(0, raw_buf)  # touch its pages once, as a reused buffer would be
        raw_get, raw_set, old, saves, restores = [], [], [], [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            model.state_save_into(0, raw_buf)
            raw_get.append(time.perf_counter() - t0)
        for _ in range(repeats):
            t0 = time.perf_counter()
            _old_save(model, 0)
            old.append(time.perf_counter() - t0)

        # Steady state: room for 3 states, so from the 4th save on each one evicts and reuses.
        host = HostCache(budget_bytes=3 * size + 1)
        ops: list[tuple[str, str, float]] = []
        reuse = PrefixReuse(
            model, scheduler, host, on_op=lambda op, tier, s: ops.append((op, tier, s))
        )
        for i in range(repeats + 3):
            slot.salt = f"tenant-{i}"  # another tenant each time: never already covered
            reuse.save(slot, keep=0)
        saves = [s for op, _, s in ops if op == "save"][3:]
        entry = next(iter(host.entries.values()))
        for _ in range(repeats):
            model.seq_clear(1)
            t0 = time.perf_counter()
            assert model.state_restore(1, raw_buf)
            raw_set.append(time.perf_counter() - t0)
        for _ in range(repeats):
            ops.clear()
            assert reuse.tiers.restore(scheduler.slots[1], entry.data, entry.tokens, "", "host")
            restores.append(ops[0][2])
    finally:
        model.close()
    med = {
        k: 1000 * statistics.median(v)
        for k, v in {
            "raw get_data ms": raw_get,
            "save (pooled) ms": saves,
            "save (before pooling) ms": old,
            "raw set_data ms": raw_set,
            "restore from host ms": restores,
        }.items()
    }
    med["state MB"] = size / 1e6
    med["save / raw get_data"] = med["save (pooled) ms"] / med["raw get_data ms"]
    med["restore / raw set_data"] = med["restore from host ms"] / med["raw set_data ms"]
    return med


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.tier_ops", allow_abbrev=False)
    p.add_argument("--model", default=None)
    p.add_argument("--tokens", type=int, default=1400)
    p.add_argument("--repeats", type=int, default=20)
    args = p.parse_args(argv)
    for name, value in measure(
        args.model or packaged_model_path(), args.tokens, args.repeats
    ).items():
        print(f"{name:28} {value:8.3f}")


if __name__ == "__main__":
    main()
