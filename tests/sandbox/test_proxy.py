"""The proxy's reading of requests and its use of charter.policy (over a real unix socket)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from charter.policy import Frame, Policy
from charter.sandbox import NetworkProxy, decide_host

from .conftest import Server


def ask(proxy: NetworkProxy, request: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(5)
        s.connect(proxy.socket_path)
        s.sendall(request)
        chunks = []
        while data := s.recv(65536):
            chunks.append(data)
    return b"".join(chunks)


@pytest.fixture
def proxy() -> Iterator[NetworkProxy]:
    frames = [Frame(Policy.from_dict({"network": {"allow": ["127.0.0.1"]}}), label="persona")]
    with NetworkProxy(frames) as p:
        yield p


def test_refusals_name_the_host_and_the_policy_reason(proxy: NetworkProxy) -> None:
    reply = ask(proxy, b"CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 403")
    [refusal] = proxy.take_refusals()
    assert (refusal.host, refusal.port) == ("evil.example", 443)
    assert "persona" in refusal.reason
    assert proxy.take_refusals() == []


def test_plain_http_forwarded_only_to_the_named_allowed_host(
    proxy: NetworkProxy, server: Server
) -> None:
    ok = ask(proxy, f"GET http://127.0.0.1:{server.port}/a HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert ok.startswith(b"HTTP/1.") and b"hello from 127.0.0.1" in ok
    assert server.paths == ["/a"]
    # userinfo tricks and origin-form requests are not forwarded anywhere
    for bad in (
        f"GET http://127.0.0.1:{server.port}@evil.example/ HTTP/1.1\r\n\r\n",
        "GET /relative HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        "CONNECT 127.0.0.1:99999 HTTP/1.1\r\n\r\n",
    ):
        assert ask(proxy, bad.encode()).startswith((b"HTTP/1.1 400", b"HTTP/1.1 403"))
    assert server.paths == ["/a"]


def test_decide_host_uses_only_the_network_rules() -> None:
    policy = Policy.from_dict({"tools": ["read"], "network": {"allow": ["*.github.com"]}})
    from charter.sandbox.proxy import network_frames

    frames = network_frames([Frame(policy)])
    assert decide_host("api.github.com", 443, frames).allowed
    assert not decide_host("github.com.evil.example", 443, frames).allowed


def test_idle_proxies_are_reused_one_call_at_a_time_with_their_own_refusals() -> None:
    from charter.sandbox.proxy import acquire_proxy, release_proxy

    frames = [Frame(Policy.from_dict({"network": {"allow": ["127.0.0.1"]}}), label="reuse")]
    first = acquire_proxy(frames)
    second = acquire_proxy(frames)  # the first is in use: a proxy of its own
    assert first is not second and first.socket_path != second.socket_path
    ask(first, b"CONNECT evil.example:443 HTTP/1.1\r\n\r\n")
    ask(second, b"CONNECT other.example:443 HTTP/1.1\r\n\r\n")
    assert [r.host for r in release_proxy(first)] == ["evil.example"]
    assert [r.host for r in release_proxy(second)] == ["other.example"]
    again = acquire_proxy(frames)  # an idle one, still listening, with no old refusals
    assert again in (first, second) and again.serving
    assert ask(again, b"CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 502")
    assert release_proxy(again) == []
    # Other network rules never get these proxies (a verdict belongs to its rules).
    other = [Frame(Policy.from_dict({"network": {"allow": ["example.com"]}}), label="reuse")]
    stranger = acquire_proxy(other)
    assert stranger not in (first, second)
    assert ask(stranger, b"CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 403")
    release_proxy(stranger)
