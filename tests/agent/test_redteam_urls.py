"""Red team, URLs: the policy reads a URL the way a Node-based fetcher does (WHATWG).

A scripted model calls a ``fetch`` tool whose handler is Node's own ``fetch`` (what the
coding CLIs use). The hostile URLs name an allowed host to a parser that is not WHATWG and
reach a loopback server to Node; each case checks the server saw no request. The allowed
twin reaches the server.
"""

from __future__ import annotations

import http.server
import shutil
import subprocess
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from charter.agent import MockProvider, agent_loop, make_tool
from charter.policy import Frame, Policy, ToolAnnotations, ToolCall, decide, host_of

from .conftest import tc

NODE = shutil.which("node")


class _Hits(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).hits.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"reached")

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[int, list[str]]]:
    hits: list[str] = []
    handler = type("Handler", (_Hits,), {"hits": hits})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd.server_address[1], hits
    finally:
        httpd.shutdown()
        httpd.server_close()


def _node_fetch(url: str) -> str:
    """Fetch with Node (WHATWG URL parsing, as Claude Code, Gemini CLI and OpenCode do)."""
    script = (
        "fetch(process.argv[1]).then(r => r.text()).then(t => console.log(t))"
        ".catch(e => console.log('error: ' + e.message))"
    )
    assert NODE is not None
    out = subprocess.run(
        [NODE, "-e", script, url], capture_output=True, text=True, timeout=30, check=False
    )
    return out.stdout.strip()


FETCH = make_tool(
    _node_fetch,
    name="fetch",
    annotations=ToolAnnotations(kind="fetch", url_args=("url",)),
)


def _run(url: str, allow: list[str]) -> str:
    provider = MockProvider([tc("fetch", url=url), "done"])
    result = agent_loop("x", provider=provider, tools=[FETCH], policy={"network": {"allow": allow}})
    (obs,) = [m["content"] for m in result.transcript["messages"] if m["role"] == "tool"]
    return str(obs)


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize(
    "template",
    [
        "http://127.0.0.1:{port}\\@api.github.com/",  # backslash ends the authority
        "http://api.github.com@127.0.0.1:{port}/",  # userinfo
        "http://api.github.com:x@127.0.0.1:{port}/",
        "http://127.1:{port}/",  # IPv4 shorthand
        "http://0x7f.0.0.1:{port}/",
        "http://2130706433:{port}/",
        "HTTP://127.0.0.1:{port}/",
    ],
)
def test_hostile_urls_never_reach_the_server(server: tuple[int, list[str]], template: str) -> None:
    port, hits = server
    obs = _run(template.format(port=port), ["api.github.com"])
    assert "permission_denied" in obs, obs
    assert hits == []


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_allowed_twin_reaches_the_server(server: tuple[int, list[str]]) -> None:
    port, hits = server
    obs = _run(f"http://127.1:{port}/ok", ["127.0.0.1"])  # the same shorthand, now allowed
    assert "reached" in obs, obs
    assert hits == ["/ok"]


FETCH_CALL = ToolAnnotations(kind="fetch", url_args=("url",))


def _decide(url: str, network: dict[str, Any]) -> Any:
    frame = Frame(Policy.from_dict({"network": network}), label="persona")
    return decide(ToolCall("fetch", {"url": url}, FETCH_CALL), [frame])


@pytest.mark.parametrize(
    ("url", "network", "allowed"),
    [
        ("file:///etc/passwd", {"allow": ["*"]}, False),  # not http(s): must be named
        ("ftp://files.example.com/x", {"allow": ["files.example.com"]}, False),
        ("ftp://files.example.com/x", {"allow": ["ftp://files.example.com"]}, True),
        ("wss://stream.example.com/", {"allow": ["wss://*.example.com"]}, True),
        ("https://stream.example.com/", {"allow": ["wss://*.example.com"]}, False),
        ("gopher://127.0.0.1:70/", {"deny": ["evil.com"]}, False),
        ("wss://evil.com/", {"deny": ["evil.com"], "allow": ["wss://*"]}, False),
        ("https://api.github.com:99999/", {"allow": ["api.github.com"]}, False),  # bad port
        ("https://api.github.com:443/", {"allow": ["api.github.com"]}, True),
        ("api.github.com:443", {"allow": ["api.github.com"]}, True),  # bare host:port
        ("https://BÜCHER.de/", {"allow": ["xn--bcher-kva.de"]}, True),  # IDNA
        ("http://[::1]:8080/", {"deny": ["::1"]}, False),
        ("https://api.github.com./", {"allow": ["api.github.com"]}, True),
    ],
)
def test_schemes_ports_and_hosts(url: str, network: dict[str, Any], allowed: bool) -> None:
    decision = _decide(url, network)
    assert decision.allowed is allowed, decision.reason


def test_the_stdlib_reading_would_have_been_wrong() -> None:
    """The differential this fixes: urlsplit and Node disagree on the host."""
    from urllib.parse import urlsplit

    url = "http://127.0.0.1:1\\@api.github.com/"
    assert urlsplit(url).hostname == "api.github.com"
    assert host_of(url) == "127.0.0.1"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_any_text_is_a_decision_never_an_exception(text: str) -> None:
    decision = _decide(text, {"allow": ["api.github.com"]})
    assert decision.allowed in (True, False)
