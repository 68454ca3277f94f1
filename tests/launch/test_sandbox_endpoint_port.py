"""Issue 30 item 3: the model endpoint is allowed as scheme + host + port, nothing wider.

With ``network.deny ["*"]`` and a base URL on ``127.0.0.1:PORT``, the launched CLI's
shell reached every other port of 127.0.0.1 through the sandbox's proxy. The hostile CLI
fetches a second local server (refused); its allowed twin fetches the endpoint (served).
"""

from __future__ import annotations

import http.server
import shutil
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import charter, env_with, make_persona, write

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")

FETCH = """#!/bin/bash
python3 - <<'PY' > "$PWD/fetch.txt" 2>&1
import urllib.request
for port in ({endpoint}, {other}):
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{{port}}/", timeout=5).read()
        print(port, "got", body.decode())
    except Exception as exc:
        print(port, "refused", type(exc).__name__)
PY
"""


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"hello from {self.server.server_address[1]}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def servers() -> Iterator[tuple[http.server.HTTPServer, http.server.HTTPServer]]:
    pair = (
        http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello),
        http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello),
    )
    for server in pair:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield pair
    finally:
        for server in pair:
            server.shutdown()
            server.server_close()


@pytest.mark.parametrize("tool", ["claude", "gemini", "opencode"])
def test_the_endpoint_opens_its_port_only(
    project: Path,
    tmp_path: Path,
    servers: tuple[http.server.HTTPServer, http.server.HTTPServer],
    tool: str,
) -> None:
    endpoint, other = (s.server_address[1] for s in servers)
    make_persona(project / ".personas", "p", policy={"network": {"deny": ["*"]}})
    bindir = tmp_path / "bin"
    cli = write(bindir / tool, FETCH.format(endpoint=endpoint, other=other))
    cli.chmod(cli.stat().st_mode | stat.S_IXUSR)
    var = {"claude": "ANTHROPIC_BASE_URL", "gemini": "GOOGLE_GEMINI_BASE_URL"}.get(
        tool, "OPENAI_BASE_URL"
    )
    env = env_with(bindir, **{var: f"http://127.0.0.1:{endpoint}"})
    out = charter("launch", tool, "p", "--sandbox", "always", cwd=project, env=env)
    assert out.returncode == 0, out.stderr
    lines = (project / "fetch.txt").read_text().splitlines()
    assert lines[0] == f"{endpoint} got hello from {endpoint}", lines  # the allowed twin
    assert lines[1].startswith(f"{other} refused"), lines
