"""WorkerPool: work runs on the pool's own threads, with the caller's context; past its threads
and its queue a task is refused at once (PoolBusy); a task counts until its thread is done with
it; and a pool whose threads all wait (as uploads wait for PDFium's lock) leaves the threads key
lookups and database calls use free."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from app.thread_pools import PoolBusy, ThreadPools, WorkerPool

WHO = contextvars.ContextVar("who", default="nobody")


def pool(threads: int = 1, queue: int = 1) -> WorkerPool:
    return WorkerPool("parse", threads, queue, "parsing documents")


def test_work_runs_on_the_pools_threads_with_the_callers_context():
    p = pool()

    async def run() -> tuple[str, str]:
        WHO.set("caller")
        return await p.run(lambda: (threading.current_thread().name, WHO.get()))

    try:
        name, who = asyncio.run(run())
    finally:
        p.shutdown()
    assert name.startswith("pool-parse") and who == "caller"


def test_an_error_comes_back_to_the_caller():
    p = pool()

    def fail() -> None:
        raise ValueError("bad document")

    with pytest.raises(ValueError, match="bad document"):
        asyncio.run(p.run(fail))
    p.shutdown()
    assert p.pending == 0


def test_past_its_threads_and_queue_a_task_is_refused_at_once():
    p, gate = pool(threads=1, queue=1), threading.Event()

    async def run() -> None:
        running = asyncio.ensure_future(p.run(gate.wait))
        waiting = asyncio.ensure_future(p.run(gate.wait))
        await asyncio.sleep(0)
        assert p.pending == 2
        with pytest.raises(PoolBusy) as e:
            await p.run(gate.wait)
        assert "busy parsing documents" in e.value.message
        gate.set()
        await asyncio.gather(running, waiting)
        assert p.pending == 0
        await p.run(lambda: None)  # room again

    try:
        asyncio.run(run())
    finally:
        gate.set()
        p.shutdown()


def test_a_task_whose_caller_went_away_counts_until_its_thread_is_done():
    p, gate = pool(threads=1, queue=0), threading.Event()

    async def run() -> None:
        task = asyncio.ensure_future(p.run(gate.wait))
        await asyncio.sleep(0.05)  # on its thread now
        task.cancel()
        await asyncio.sleep(0)
        assert p.pending == 1  # the thread still works on it
        gate.set()
        while p.pending:
            await asyncio.sleep(0.01)

    try:
        asyncio.run(run())
    finally:
        gate.set()
        p.shutdown()


def test_a_pool_whose_threads_all_wait_leaves_the_default_threads_free():
    pools, pdfium = ThreadPools.build(parse=2, images=1, fetch=1, queue=64), threading.Event()

    async def run() -> str:
        # 40 uploads wait for PDFium (more than asyncio's default pool has threads anywhere).
        waiting = [asyncio.ensure_future(pools.parse.run(pdfium.wait)) for _ in range(40)]
        await asyncio.sleep(0.05)
        assert pools.parse.pending == 40
        # A key lookup meanwhile: asyncio's default threads are free for it.
        looked_up = await asyncio.wait_for(asyncio.to_thread(lambda: "key"), timeout=30)
        pdfium.set()
        await asyncio.gather(*waiting)
        return looked_up

    try:
        assert asyncio.run(run()) == "key"
    finally:
        pdfium.set()
        pools.shutdown()
