from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.lib.server_process import ServerProcess, make_key
from tests.app.api.keyed_server import STATIC_KEY, KeyedServer


@pytest.fixture(scope="session")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeyedServer]:
    """Tenants alice and bob, an admin, the static key; at most 1 request at once per key."""
    data = tmp_path_factory.mktemp("keyed")
    keys = {
        "alice": make_key(data, "alice"),
        "bob": make_key(data, "bob"),
        "root": make_key(data, "root", "--admin"),
        "static": STATIC_KEY,
    }
    # No document prefill: a tenant's own prefill would be a cached prefix the probes do not
    # wait for (prefill under the tenant's salt is tested in tests/app/docs).
    args = ("-np", "2", "-c", "2048", "--data-dir", str(data), "--api-key", STATIC_KEY)
    args += ("--doc-prefill-tokens", "0")
    with ServerProcess(*args, "--max-concurrent-per-key", "1") as srv:
        yield KeyedServer(srv, data, keys)
