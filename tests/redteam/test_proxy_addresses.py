"""Class 6 (issue 29): loopback and special addresses in deny lists, and what the proxy dials.

Under ``network.allow ["*"]`` with ``deny ["127.0.0.1", "localhost", "169.254.169.254"]``
every spelling of the local machine is refused (addresses match as addresses), a name that
resolves to a denied address is refused, a CONNECT target that smuggles another host is
refused, and the listener on 127.0.0.1 never sees a request. The twin: with ``127.0.0.1``
allowed, the request arrives, and with the Host header the proxy set, not the client's.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import run_loop, tc

pytestmark = pytest.mark.needs_sandbox

DENY_LOCAL: dict[str, Any] = {
    "commands": {"allow": ["curl:*", "python3:*"]},
    "paths": {"allow": ["./"]},
    "network": {"allow": ["*"], "deny": ["127.0.0.1", "localhost", "169.254.169.254"]},
}
ALLOW_LOCAL: dict[str, Any] = {**DENY_LOCAL, "network": {"allow": ["127.0.0.1"]}}


class Listener:
    """A 127.0.0.1 HTTP server that records each request's path and Host header."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.seen.append((self.path, self.headers.get("Host", "")))
                body = b"listener reached\n"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                return

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


def _curl(url: str) -> str:
    return f"curl -s -m 5 -o /dev/null -w '%{{http_code}}' '{url}'"


def test_every_spelling_of_the_local_machine_is_refused(ws: Path, listener: Listener) -> None:
    port = listener.port
    spellings = [
        f"http://[::ffff:127.0.0.1]:{port}/a",
        f"http://0.0.0.0:{port}/b",
        f"http://127.0.0.2:{port}/c",
        f"http://[::1]:{port}/d",
        f"http://[0:0:0:0:0:0:0:1]:{port}/e",
        f"http://2130706433:{port}/f",
        f"http://0x7f.1:{port}/g",
        f"http://sub.localhost:{port}/h",
        f"http://[::ffff:169.254.169.254]:{port}/i",
    ]
    obs = run_loop(ws, DENY_LOCAL, *(tc("bash", command=_curl(u)) for u in spellings))
    for url, seen in zip(spellings, obs, strict=True):
        result = json.loads(seen)
        assert result["stdout"] == "403", (url, seen)
        assert result["sandbox"]["refused_hosts"], (url, seen)
    assert listener.seen == []


def test_a_name_resolving_to_a_denied_address_is_refused(ws: Path, listener: Listener) -> None:
    name = socket.gethostname()
    try:
        addresses = {a[4][0] for a in socket.getaddrinfo(name, listener.port)}
    except OSError:
        pytest.skip("the host name does not resolve here")
    if not addresses or not all(a.startswith("127.") or a == "::1" for a in addresses):
        pytest.skip(f"{name} does not resolve to loopback here")
    [seen] = run_loop(ws, DENY_LOCAL, tc("bash", command=_curl(f"http://{name}:{listener.port}/n")))
    result = json.loads(seen)
    assert result["stdout"] == "403", seen
    [refusal] = result["sandbox"]["refused_hosts"]
    assert "resolves to 127." in refusal["reason"]
    assert listener.seen == []


SMUGGLE = """python3 - <<'EOF'
import os, socket, urllib.parse
proxy = urllib.parse.urlsplit(os.environ.get("HTTP_PROXY") or os.environ["http_proxy"])
host, port = proxy.hostname, proxy.port
for target in ["127.0.0.1#.example.com:{port}", "example.com#@127.0.0.1:{port}",
               "127.0.0.1 :{port}", "example.com\\\\@127.0.0.1:{port}"]:
    s = socket.create_connection((host, int(port)))
    s.sendall(f"CONNECT {{target}} HTTP/1.1\\r\\nHost: {{target}}\\r\\n\\r\\n".encode())
    print(target, s.recv(200).split(b"\\r\\n")[0].decode())
    s.close()
EOF"""


def test_connect_target_smuggling_another_host_is_refused(ws: Path, listener: Listener) -> None:
    policy = {**DENY_LOCAL, "network": {"allow": ["*"], "deny": ["127.0.0.1"]}}
    [seen] = run_loop(ws, policy, tc("bash", command=SMUGGLE.format(port=listener.port)))
    lines = json.loads(seen)["stdout"].splitlines()
    assert len(lines) == 4, seen
    for line in lines:
        assert " 400 " in line or " 403 " in line, line
    assert listener.seen == []


def test_twin_allowed_address_reaches_the_listener_with_the_checked_host(
    ws: Path, listener: Listener
) -> None:
    port = listener.port
    obs = run_loop(
        ws,
        ALLOW_LOCAL,
        tc("bash", command=f"curl -s -m 5 http://127.0.0.1:{port}/ok"),
        tc("bash", command=f"curl -s -m 5 -H 'Host: evil.example' http://127.0.0.1:{port}/host"),
        tc("bash", command=f"curl -s -m 5 'http://[::ffff:127.0.0.1]:{port}/mapped'"),
    )
    assert all("listener reached" in o for o in obs), obs
    assert listener.seen == [
        ("/ok", f"127.0.0.1:{port}"),
        ("/host", f"127.0.0.1:{port}"),  # the client's Host header did not pass
        ("/mapped", f"[::ffff:7f00:1]:{port}"),  # as parsed, dialled as 127.0.0.1
    ]
