"""Outbound.fetch on a network the test controls: one deadline for the whole fetch (a server
that trickles is cut off at it), a size limit (declared or counted), and errors that say what
went wrong without the remote status, body or addresses."""

from __future__ import annotations

import asyncio

import pytest

from app.outbound.outbound_http import FetchError
from tests.app.outbound.fakes import Canned, answer, outbound


def fetch(net: Canned, url: str = "http://public.test/a.png", limit: int = 100) -> bytes:
    return asyncio.run(outbound(net).fetch(url, limit, 1.0))


def test_the_body_of_a_200_is_fetched():
    assert fetch(Canned([answer("200 OK", b"image")])) == b"image"


def test_a_refused_host_says_so_and_connects_nowhere():
    net = Canned([])
    with pytest.raises(FetchError) as e:
        fetch(net, "http://metadata.test/")
    assert e.value.refused and "public addresses" in e.value.message
    assert "169.254" not in e.value.message and net.connected == []


def test_an_error_status_is_not_told():
    net = Canned([answer("404 Not Found", b"internal secret")])
    with pytest.raises(FetchError) as e:
        fetch(net)
    assert e.value.message == "the URL could not be fetched" and not e.value.refused


def test_a_body_over_the_limit_is_refused_declared_or_not():
    with pytest.raises(FetchError) as e:
        fetch(Canned([answer("200 OK", b"x" * 101)]))
    assert "larger than the limit of 100 bytes" in e.value.message
    chunks = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"65\r\n" + b"x" * 101]
    with pytest.raises(FetchError) as e:
        fetch(Canned([[*chunks, b"\r\n0\r\n\r\n"]]))
    assert "larger than the limit" in e.value.message


def test_a_trickling_server_is_cut_off_at_the_deadline():
    """A read every 0.3 s never trips a per-read timeout; the deadline is for the whole fetch."""
    parts = [b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n", *([b"x"] * 50)]
    with pytest.raises(FetchError) as e:
        fetch(Canned([parts], slow=0.3))
    assert e.value.message == "the URL did not answer in full within 1 s"


def test_an_unreachable_host_is_a_plain_error():
    with pytest.raises(FetchError) as e:
        fetch(Canned([]), "http://nowhere.test/")
    assert e.value.message == "the URL could not be fetched"
