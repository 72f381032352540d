"""`EngineParts`: the collaborators `Engine` is made of, built and wired together once.

The scheduler and the speculator decide what runs; `PrefixReuse` brings KV back from the cache
tiers (host memory, and disk with --cache-dir); `ChunkBlend` places documents' chunk KV; the
`Stepper` computes one step; the `EngineLoop` drives them all on the engine thread. `Engine`
(app/engine/engine.py) builds them in its constructor and keeps them to itself: the outside
enters through `Engine`'s methods, never through a part.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from app.cache.chunk_kv import ChunkKv, model_fingerprint
from app.cache.disk_cache import DiskCache
from app.cache.host_cache import HostCache
from app.engine.background_pacer import BackgroundPacer
from app.engine.blend.blend_gate import model_gate
from app.engine.blend.chunk_blend import ChunkBlend
from app.engine.core.arrivals import Arrivals
from app.engine.core.engine_loop import EngineLoop
from app.engine.core.inbox import Inbox
from app.engine.core.model_sleep import ModelSleep
from app.engine.core.outbox import FIRST_EVENT_WAIT_S, Outbox
from app.engine.core.quiet_gate import QuietGate
from app.engine.core.scheduler import Scheduler
from app.engine.core.stepper import Stepper
from app.engine.engine_config import EngineConfig
from app.engine.kv.kv_compactor import KvCompactor
from app.engine.kv.prefix_reuse import PrefixReuse
from app.engine.kv.slot_files import SlotFiles
from app.engine.llama.model import Model
from app.engine.llama.vision import Vision
from app.engine.speculation.draft_cost import DraftCost
from app.engine.speculation.reply_memory import ReplyMemory
from app.engine.speculation.speculator import Speculator

log = logging.getLogger(__name__)


@dataclass(slots=True)
class EngineParts:
    config: EngineConfig
    model: Model
    speculator: Speculator
    scheduler: Scheduler
    arrivals: Arrivals
    reuse: PrefixReuse
    blend: ChunkBlend
    vision: Vision | None  # opened on the engine thread by `Engine.start()`
    stepper: Stepper
    compactor: KvCompactor
    outbox: Outbox
    inbox: Inbox  # tasks and calls from other threads; closed = the engine is stopping
    quiet: QuietGate  # background work waits on it for clients
    slot_files: SlotFiles
    sleep: ModelSleep  # frees the model when idle (--sleep-idle-seconds) and loads it for work
    loop: EngineLoop


def build_parts(
    config: EngineConfig,
    model: Model,
    n_ctx_request: int,
    wake: threading.Event,
    on_cache_op: Callable[[str, str, float], None] | None,
) -> EngineParts:
    """The parts of an engine on `model`; `wake` is set by whatever gives the engine thread work,
    `on_cache_op` as `Engine`'s."""
    speculator = _speculator(config, model)
    scheduler = Scheduler(model.n_seq_max, config.slot_prompt_similarity, speculator, n_ctx_request)
    host, disk = _cache_tiers(config)
    arrivals = Arrivals(wake=wake.set)
    reuse = PrefixReuse(
        model,
        scheduler,
        host,
        disk,
        config.cache_reuse,
        wake=wake.set,
        on_op=on_cache_op,
    )
    chunks = ChunkKv(host, disk, model_fingerprint(config.model_path))
    gate = model_gate(model, config.blend_sink_tokens, config.blend_force)
    blend = ChunkBlend(model, chunks, gate, forgotten=reuse.forgotten)
    vision = (
        Vision(model, config.mmproj_path, config.n_threads, config.encoder_cache_bytes)
        if config.mmproj_path
        else None
    )
    pacer = BackgroundPacer(config.background_batch_ms / 1000.0, config.n_batch)
    stepper = Stepper(model, scheduler, reuse, n_ctx_request, pacer, vision, speculator)
    compactor = KvCompactor(model, host.pool, config.defrag_thold, on_cache_op)
    # Events of the steps, one event-loop wake-up per stream interval at most. Waiting for a
    # loop to send first tokens pays on CPU only, where the next decode takes the cores the
    # loop needs.
    on_cpu = model.n_gpu_layers == 0
    outbox = Outbox(FIRST_EVENT_WAIT_S if on_cpu else 0.0)
    inbox = Inbox(wake.set)
    quiet = QuietGate(arrivals)
    slot_files = SlotFiles(model, scheduler.slots, reuse, inbox.put_call)
    sleep = ModelSleep(
        config.sleep_idle_seconds, model, scheduler, reuse, blend, vision, stepper, config.warmup,
        wake.set,
    )  # fmt: skip
    loop = EngineLoop(
        config,
        model,
        scheduler,
        reuse,
        stepper,
        compactor,
        inbox,
        outbox,
        arrivals,
        wake,
        quiet,
        blend,
        sleep,
    )
    return EngineParts(
        config=config,
        model=model,
        speculator=speculator,
        scheduler=scheduler,
        arrivals=arrivals,
        reuse=reuse,
        blend=blend,
        vision=vision,
        stepper=stepper,
        compactor=compactor,
        outbox=outbox,
        inbox=inbox,
        quiet=quiet,
        slot_files=slot_files,
        sleep=sleep,
        loop=loop,
    )


def _speculator(config: EngineConfig, model: Model) -> Speculator:
    # A model that cannot drop its newest positions cannot take back rejected drafts. On a
    # sliding-window model (Gemma 3) drafts verified in a batch changed greedy replies at logprob
    # gaps far above a numerical tie (docs/speculation.md), so it does not speculate either.
    speculates = model.can_roll_back and model.n_swa <= 0
    if config.spec_type != "none" and not speculates:
        log.warning("speculation is off: this model cannot take back drafts exactly")
    return Speculator(
        config.spec_type if speculates else "none",
        config.spec_ngram_size_n,
        config.spec_draft_n_max,
        config.spec_draft_n_min,
        ReplyMemory(config.spec_ngram_size_n, config.spec_replies),
        DraftCost(fixed=config.spec_draft_cost if config.spec_draft_cost >= 0 else None),
    )


def _cache_tiers(config: EngineConfig) -> tuple[HostCache, DiskCache | None]:
    """The host-memory tier, and the disk tier with --cache-dir (shared with other replicas under
    --cache-shared, through this replica's journal)."""
    host = HostCache(config.cache_ram_bytes, config.cache_ram_tokens, config.cache_policy)
    disk = (
        DiskCache(
            config.cache_dir,
            config.model_path,
            config.cache_disk_bytes,
            journal=config.cache_journal if config.cache_shared else None,
        )
        if config.cache_dir
        else None
    )
    return host, disk
