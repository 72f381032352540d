"""The browser guard's decisions: which Host a server answers (DNS rebinding) and when a page's
Origin is the server's own. Through a real server: tests/app/api/attacks/test_browsers.py."""

from __future__ import annotations

import pytest

from app.api.middleware.browser_guard import (
    HostPolicy,
    host_policy,
    is_local_name,
    same_host,
    split_host,
)


@pytest.mark.parametrize(
    "name", ["localhost", "LocalHost.", "app.localhost", "127.0.0.1", "127.8.9.1", "::1", "[::1]"]
)
def test_local_names(name: str):
    assert is_local_name(name)


@pytest.mark.parametrize(
    "name", ["", "0.0.0.0", "::", "10.0.0.1", "localhost.evil.example", "127.0.0.1.nip.io"]
)
def test_names_that_are_not_local(name: str):
    assert not is_local_name(name)


def test_a_host_header_is_split_into_name_and_port():
    assert split_host("LocalHost:8080") == ("localhost", 8080)
    assert split_host("[::1]:80") == ("::1", 80)
    assert split_host("chat.example.") == ("chat.example", None)
    for bad in ("", "a b", "x:port", "user@localhost", "localhost/path", "localhost:99999"):
        assert split_host(bad) is None, bad


def test_unset_only_a_server_on_loopback_alone_checks_the_host():
    local = host_policy(None, ["127.0.0.1"])
    assert local.allows("localhost:8080") and local.allows("[::1]:8080")
    assert not local.allows("evil.example:8080") and not local.allows("")
    assert host_policy(None, ["localhost", "::1"]) == local
    assert host_policy(None, ["0.0.0.0"]) == HostPolicy(None)
    assert host_policy(None, ["127.0.0.1", "192.168.1.2"]) == HostPolicy(None)


def test_allowed_hosts_adds_names_to_the_local_ones_and_star_allows_any():
    listed = host_policy("Chat.Example., other.example", ["0.0.0.0"])
    assert listed.allows("chat.example") and listed.allows("chat.example:443")
    assert listed.allows("localhost:8080")  # local tools (health checks) keep working
    assert not listed.allows("evil.example")
    assert host_policy("*", ["127.0.0.1"]).allows("evil.example")


def test_a_page_is_the_servers_own_when_its_host_and_port_are_those_of_host():
    assert same_host("http://127.0.0.1:8080", "127.0.0.1:8080")
    assert same_host("http://chat.example", "chat.example:80")
    assert same_host("https://chat.example", "chat.example")  # nginx's $host: the name alone
    assert not same_host("http://127.0.0.1:9999", "127.0.0.1:8080")
    assert not same_host("https://chat.example", "chat.example:80")
    assert not same_host("http://evil.example", "chat.example")
    assert not same_host("null", "chat.example")
