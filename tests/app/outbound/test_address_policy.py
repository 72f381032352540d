"""OutboundPolicy: public unicast addresses pass; loopback, link-local, private, shared,
multicast and unspecified ones are refused, also written as IPv6 addresses that reach them; a
host the operator names may resolve to anything; the refusal names the host, never the address
it resolved to."""

from __future__ import annotations

import ipaddress

import pytest

from app.outbound.address_policy import OutboundPolicy, OutboundRefused, is_public

PUBLIC = ["93.184.216.34", "8.8.8.8", "2606:4700::1111"]
REFUSED = [
    "127.0.0.1",  # loopback
    "127.8.9.10",
    "::1",
    "169.254.169.254",  # link-local: the cloud's metadata service
    "fe80::1",
    "10.0.0.1",  # private
    "172.16.5.4",
    "192.168.1.1",
    "fc00::1",
    "100.64.0.1",  # shared (carrier-grade NAT)
    "0.0.0.0",  # unspecified: this host
    "::",
    "224.0.0.1",  # multicast
    "ff02::1",
    "255.255.255.255",
    "::ffff:127.0.0.1",  # IPv4-mapped
    "::ffff:10.0.0.1",
    "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
    "2002:a00:1::1",  # 6to4 of 10.0.0.1
]


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass(address: str):
    assert is_public(ipaddress.ip_address(address))
    assert OutboundPolicy().check("example.org", [address]) == [address]


@pytest.mark.parametrize("address", REFUSED)
def test_local_and_private_addresses_are_refused(address: str):
    assert not is_public(ipaddress.ip_address(address))
    with pytest.raises(OutboundRefused) as e:
        OutboundPolicy().check("intranet.test", [address])
    assert "intranet.test" in str(e.value) and address not in str(e.value)


def test_one_refused_address_among_public_ones_refuses_the_host():
    with pytest.raises(OutboundRefused):
        OutboundPolicy().check("mixed.test", ["93.184.216.34", "10.0.0.1"])


def test_a_named_host_may_resolve_to_any_address():
    policy = OutboundPolicy.from_list(" MCP.Internal. , 10.0.0.7,[::1]")
    assert policy.check("mcp.internal", ["10.0.0.1"]) == ["10.0.0.1"]
    assert policy.check("10.0.0.7", ["10.0.0.7"]) == ["10.0.0.7"]
    assert policy.check("::1", ["::1"]) == ["::1"]
    with pytest.raises(OutboundRefused):  # only the hosts named, by the name in the URL
        policy.check("other.internal", ["10.0.0.1"])
    assert OutboundPolicy.from_list(None) == OutboundPolicy.from_list("") == OutboundPolicy()


def test_what_is_not_an_address_is_refused():
    with pytest.raises(OutboundRefused):
        OutboundPolicy().check("odd.test", ["not-an-address"])
