"""llama-server's CORS: the policy's choice of origin (`CorsPolicy`), and through real servers the
preflight answered on any path without a key, the origin reflected or refused, and the header on
every answer, a refusal of the key included."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from app.api.middleware.cors import CorsPolicy, default_origins, is_localhost
from bench.lib.server_process import ServerProcess
from tests.app.api.keyed_server import KeyedServer

PREFLIGHT = {
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "Authorization",
}
LOCAL = ["http://localhost", "http://localhost:8080", "http://127.0.0.1:3000", "http://[::1]:3000"]
FOREIGN = ["http://evil.com", "http://notlocalhost", "http://localhost.evil.com", "localhost"]


def preflight(url: str, origin: str) -> httpx.Response:
    return httpx.options(url + "/v1/chat/completions", headers={"Origin": origin, **PREFLIGHT})


@pytest.mark.parametrize("origin", LOCAL)
def test_localhost_origins_are_loopback_hosts_of_any_port(origin: str):
    assert is_localhost(origin)


@pytest.mark.parametrize("origin", [*FOREIGN, "http://localhost:nope", "ftp://localhost", ""])
def test_other_origins_are_not_localhost(origin: str):
    assert not is_localhost(origin)


def test_the_policy_chooses_the_origin_as_llama_server():
    assert CorsPolicy("*").allowed_origin("http://a.example") == "http://a.example"
    assert CorsPolicy("*").allowed_origin("") is None  # no Origin: nothing to reflect
    assert CorsPolicy("*", credentials=False).allowed_origin("http://a.example") == "*"
    single = CorsPolicy("http://a.example")  # sent whatever the request's: the browser compares
    assert single.allowed_origin("http://b.example") == "http://a.example"
    listed = CorsPolicy("http://a.example, http://b.example")
    assert listed.allowed_origin("http://b.example") == "http://b.example"
    assert listed.allowed_origin("http://c.example") is None


def test_unset_origins_are_any_with_a_key_and_localhost_without():
    assert default_origins(None, "key") == "*"
    assert default_origins(None, None) == "localhost"
    assert default_origins("http://a.example", None) == "http://a.example"


def test_a_preflight_needs_no_key_and_says_what_is_allowed(keyed: KeyedServer):
    r = preflight(keyed.url, "http://web.example")
    assert r.status_code == 200 and r.content == b""
    assert r.headers["access-control-allow-origin"] == "http://web.example"
    assert r.headers["access-control-allow-credentials"] == "true"
    assert r.headers["access-control-allow-methods"] == "GET, POST, DELETE, OPTIONS"
    assert r.headers["access-control-allow-headers"] == "*"
    # spelled as llama-server spells them: some clients look them up case-sensitively
    names = {k.decode() for k, _ in r.headers.raw}
    assert {"Access-Control-Allow-Origin", "Access-Control-Allow-Headers"} <= names
    # on any path, a route or not: it is answered before routing
    assert httpx.options(keyed.url + "/nowhere", headers=PREFLIGHT).status_code == 200


def test_every_answer_carries_the_origin_a_refused_key_too(keyed: KeyedServer):
    origin = {"Origin": "http://web.example"}
    refused = httpx.post(keyed.url + "/v1/chat/completions", json={}, headers=origin)
    assert refused.status_code == 401  # the browser may read why
    assert refused.headers["access-control-allow-origin"] == "http://web.example"
    health = httpx.get(keyed.url + "/health", headers=origin)
    assert health.headers["access-control-allow-origin"] == "http://web.example"
    assert "Origin" in health.headers["vary"]
    assert "access-control-allow-origin" not in httpx.get(keyed.url + "/health").headers


@pytest.fixture(scope="module")
def open_server() -> Iterator[ServerProcess]:
    with ServerProcess("-np", "1", "-c", "512") as srv:  # no key: localhost origins only
        yield srv


@pytest.mark.parametrize("origin", LOCAL)
def test_an_open_server_reflects_localhost_origins(open_server: ServerProcess, origin: str):
    r = preflight(open_server.base_url, origin)
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == origin


@pytest.mark.parametrize("origin", FOREIGN)
def test_an_open_server_names_no_other_origin(open_server: ServerProcess, origin: str):
    r = preflight(open_server.base_url, origin)
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
    health = httpx.get(open_server.base_url + "/health", headers={"Origin": origin})
    assert "access-control-allow-origin" not in health.headers
