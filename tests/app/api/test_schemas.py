"""The request fields every generation route shares: work done once per request body."""

from __future__ import annotations

import asyncio
import threading

from app.api.schemas import GenerationFields


def test_work_asked_for_by_every_generation_of_a_request_runs_once():
    body = GenerationFields()
    calls: list[str] = []
    started = threading.Event()

    def convert() -> str:
        calls.append(threading.current_thread().name)
        started.wait(5)  # the others ask while it runs
        return "root ::= x"

    async def main() -> list[str]:
        asks = [body.once("grammar", convert) for _ in range(16)]
        await asyncio.sleep(0.05)
        started.set()
        done = list(await asyncio.gather(*asks))
        done.append(await GenerationFields().once("grammar", convert))  # another request's own
        return done

    assert asyncio.run(main()) == ["root ::= x"] * 17
    assert len(calls) == 2 and threading.main_thread().name not in calls  # off the event loop
