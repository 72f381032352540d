"""app/router/model_router.py with stand-in model servers: loading on request, the least recently
used idle model unloaded for room, a busy one never, one load for many requests, first come
first served, a client that leaves unloads nothing, a server that fails is `failed` with why.
(The real servers: tests/app/api/router/test_router_routes.py.)"""

from __future__ import annotations

import asyncio

import pytest

from app.router.model_catalog import ModelSpec
from app.router.model_router import FAILED, LOADED, UNLOADED, ModelRouter, RouterError

pytestmark = pytest.mark.anyio  # anyio's pytest plugin runs the coroutines


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class FakeChild:
    """A model server that starts at once (or fails, or waits for `gate`)."""

    def __init__(self, name: str, fail: bool = False, gate: asyncio.Event | None = None):
        self.name, self.fail, self.gate = name, fail, gate
        self.running = False
        self.proc = object()
        self.asleep = False
        self.base_url = f"http://{name}"

    def start(self) -> None:
        self.running = True

    async def ready(self, client: object, awake: bool) -> None:
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            self.running = False
            raise RuntimeError(f"{self.name} cannot load")
        self.asleep = False

    def sleep(self) -> None:
        self.asleep = True

    def wake(self) -> None:
        self.asleep = False

    def failure(self) -> str:
        return "exited"

    def stop(self, timeout: float = 30.0) -> None:
        self.running = False


def make(names: str, max_loaded: int, autoload: bool = True, **children) -> ModelRouter:  # noqa: ANN003
    specs = {n: ModelSpec(n, f"/{n}.gguf") for n in names}
    made: dict[str, FakeChild] = {}

    def child(spec: ModelSpec) -> FakeChild:
        made[spec.name] = children.get(spec.name) or FakeChild(spec.name)
        return made[spec.name]

    router = ModelRouter(specs, max_loaded, autoload, child)  # type: ignore[arg-type]
    router.children = made  # type: ignore[attr-defined]
    return router


def statuses(router: ModelRouter) -> dict[str, str]:
    return {e.name: e.status for e in router.entries()}


async def use(router: ModelRouter, name: str) -> None:
    await router.release(await router.acquire(name))


async def test_the_least_recently_used_idle_model_makes_room() -> None:
    router = make("abc", max_loaded=2)
    await use(router, "a")
    await use(router, "b")
    await use(router, "c")
    assert statuses(router) == {"a": UNLOADED, "b": LOADED, "c": LOADED}
    assert router.children["a"].asleep  # asleep, not gone: its KV stays
    await use(router, "a")  # woken, b goes
    assert statuses(router) == {"a": LOADED, "b": UNLOADED, "c": LOADED}
    assert router.models["a"].loads == 2


async def test_a_busy_model_is_not_unloaded_the_request_waits() -> None:
    router = make("ab", max_loaded=1)
    busy = await router.acquire("a")
    waiting = asyncio.create_task(router.acquire("b"))
    await asyncio.sleep(0.05)
    assert not waiting.done() and statuses(router)["a"] == LOADED
    await router.release(busy)
    await router.release(await asyncio.wait_for(waiting, 5))
    assert statuses(router) == {"a": UNLOADED, "b": LOADED}


async def test_many_requests_for_one_model_share_one_load_and_one_eviction() -> None:
    router = make("abc", max_loaded=2)
    await use(router, "b")
    busy = await router.acquire("a")  # a is the most recent and busy: b must go
    waiters = [asyncio.create_task(use(router, "c")) for _ in range(3)]
    await asyncio.wait_for(asyncio.gather(*waiters), 5)
    await router.release(busy)
    assert statuses(router) == {"a": LOADED, "b": UNLOADED, "c": LOADED}
    assert router.models["c"].loads == 1


async def test_a_client_that_leaves_while_waiting_unloads_nothing() -> None:
    router = make("ab", max_loaded=1)
    busy = await router.acquire("a")
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(router.acquire("b"), 0.1)
    await router.release(busy)
    await asyncio.sleep(0.05)
    assert statuses(router) == {"a": LOADED, "b": UNLOADED}


async def test_waiters_are_served_in_arrival_order() -> None:
    router = make("abc", max_loaded=1)
    busy = await router.acquire("a")
    served: list[str] = []

    async def ask(name: str) -> None:
        entry = await router.acquire(name)
        served.append(name)
        await asyncio.sleep(0.01)
        await router.release(entry)

    first = asyncio.create_task(ask("b"))
    await asyncio.sleep(0.02)
    second = asyncio.create_task(ask("c"))
    await asyncio.sleep(0.02)
    await router.release(busy)
    await asyncio.wait_for(asyncio.gather(first, second), 5)
    assert served == ["b", "c"]


async def test_a_model_that_fails_is_failed_with_the_reason_and_a_load_tries_again() -> None:
    router = make("ab", max_loaded=1, a=FakeChild("a", fail=True))
    with pytest.raises(RouterError, match="failed to load: a cannot load") as failed:
        await router.acquire("a")
    assert failed.value.status == 503
    assert statuses(router)["a"] == FAILED and router.models["a"].failure == "a cannot load"
    await use(router, "b")  # the others are served
    router.children["a"].fail = False
    await router.load("a")
    await use(router, "a")
    assert statuses(router) == {"a": LOADED, "b": UNLOADED}


async def test_without_autoload_a_request_needs_an_explicit_load() -> None:
    router = make("ab", max_loaded=2, autoload=False)
    with pytest.raises(RouterError, match="not loaded"):
        await router.acquire("a")
    await router.load("a")
    await use(router, "a")
    with pytest.raises(RouterError, match="already running"):
        await router.load("a")
    await router.unload("a")
    assert statuses(router)["a"] == UNLOADED
    with pytest.raises(RouterError, match="not running"):
        await router.unload("a")


async def test_a_request_naming_no_model() -> None:
    router = make("ab", max_loaded=2)
    with pytest.raises(RouterError, match="missing"):
        router.default_model(required=True)
    assert router.default_model(required=False) == "a"
    await use(router, "b")
    assert router.default_model(required=False) == "b"  # the loaded one used last
    assert make("a", max_loaded=1).default_model(required=True) == "a"
    with pytest.raises(RouterError, match="'z' not found"):
        router.entry("z")


async def test_a_load_asked_while_another_loads_waits_for_room() -> None:
    gate = asyncio.Event()
    router = make("ab", max_loaded=1, a=FakeChild("a", gate=gate))
    await router.load("a")
    await router.load("b")  # no room while a loads: queued, not refused
    assert statuses(router) == {"a": "loading", "b": UNLOADED}
    gate.set()
    for _ in range(100):
        await asyncio.sleep(0.01)
        if statuses(router)["b"] == LOADED:
            break
    assert statuses(router) == {"a": UNLOADED, "b": LOADED}
