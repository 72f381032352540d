"""GuardedBackend through a real httpx client, on a resolver and a network the test controls:
a name is checked by what it resolves to and connected at the checked address; a redirect to a
refused host is refused at the hop, before it connects; env proxies are not used."""

from __future__ import annotations

import asyncio

import httpcore
import httpx
import pytest

from app.outbound.address_policy import OutboundPolicy, OutboundRefused
from app.outbound.guarded_transport import MAX_REDIRECTS, GuardedBackend, guarded_client
from app.outbound.resolver import pool_resolver
from app.thread_pools import WorkerPool
from tests.app.outbound.fakes import Canned, FakeResolver, answer


def get(url: str, net: Canned, resolver: FakeResolver, allow: str = "") -> httpx.Response:
    async def run() -> httpx.Response:
        backend = GuardedBackend(OutboundPolicy.from_list(allow), resolver, net)
        async with guarded_client(backend, 5.0) as client:
            return await client.get(url)

    return asyncio.run(run())


def test_a_public_name_is_connected_at_the_address_it_was_checked_at():
    net, resolver = Canned([answer("200 OK", b"ok")]), FakeResolver()
    r = get("http://public.test/x", net, resolver)
    assert (r.status_code, r.text) == (200, "ok")
    assert resolver.asked == ["public.test"] and net.connected == ["93.184.216.34"]


@pytest.mark.parametrize("host", ["metadata.test", "intranet.test", "mixed.test", "10.0.0.1"])
def test_a_name_that_resolves_to_a_refused_address_is_never_connected(host: str):
    net = Canned([answer("200 OK")])
    with pytest.raises(OutboundRefused):
        get(f"http://{host}/latest/meta-data/", net, FakeResolver())
    assert net.connected == []


def test_a_named_host_is_reached_whatever_it_resolves_to():
    net = Canned([answer("200 OK", b"lan")])
    assert get("http://intranet.test/", net, FakeResolver(), allow="intranet.test").text == "lan"
    assert net.connected == ["10.0.0.1"]


@pytest.mark.parametrize("to", ["http://metadata.test/", "http://10.0.0.1/", "http://[::1]:80/"])
def test_a_redirect_to_a_refused_host_is_refused_at_the_hop(to: str):
    net = Canned([answer("302 Found", location=to)])
    with pytest.raises(OutboundRefused):
        get("http://public.test/", net, FakeResolver())
    assert net.connected == ["93.184.216.34"]  # the first hop only


def test_a_redirect_to_another_public_host_is_followed_and_checked():
    net = Canned([answer("302 Found", location="http://other.test/y"), answer("200 OK", b"y")])
    resolver = FakeResolver()
    assert get("http://public.test/", net, resolver).text == "y"
    assert resolver.asked == ["public.test", "other.test"]
    assert net.connected == ["93.184.216.34", "93.184.216.35"]


def test_redirects_are_bounded():
    hops = [f"hop{i}.test" for i in range(MAX_REDIRECTS + 2)]
    resolver = FakeResolver({host: [f"93.184.216.{i + 1}"] for i, host in enumerate(hops)})
    loop = [answer("302 Found", location=f"http://{host}/") for host in hops[1:]]
    with pytest.raises(httpx.TooManyRedirects):
        get(f"http://{hops[0]}/", Canned(loop), resolver)


def test_an_unknown_name_is_a_connect_error():
    with pytest.raises(httpx.ConnectError):
        get("http://nowhere.test/", Canned([]), FakeResolver())


def test_env_proxies_are_not_used(monkeypatch: pytest.MonkeyPatch):
    """A proxy would look the name up itself, past the check."""
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")
    net = Canned([answer("200 OK")])
    assert get("http://public.test/", net, FakeResolver()).status_code == 200
    assert net.connected == ["93.184.216.34"]


def test_the_system_resolver_runs_in_its_pool_and_skips_addresses():
    pool = WorkerPool("fetch", 1, 0, "looking up remote hosts")
    resolve = pool_resolver(pool)

    async def run() -> tuple[list[str], list[str]]:
        return await resolve("10.0.0.1", 80), await resolve("localhost", 80)

    try:
        literal, local = asyncio.run(run())
    finally:
        pool.shutdown()
    assert literal == ["10.0.0.1"]
    assert local and all(a in ("127.0.0.1", "::1") for a in local)


def test_unix_sockets_are_refused():
    backend = GuardedBackend(OutboundPolicy(), FakeResolver(), httpcore.AsyncMockBackend([]))
    with pytest.raises(OutboundRefused):
        asyncio.run(backend.connect_unix_socket("/var/run/docker.sock"))
