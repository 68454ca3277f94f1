"""Shared fixtures: a scratch workspace and a 127.0.0.1 HTTP server that counts requests."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from charter.sandbox import available


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "needs_sandbox: runs commands under bubblewrap")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    info = available()
    if info.ok:
        return
    import os

    if os.environ.get("CI") == "true":
        raise pytest.UsageError("bubblewrap must work under CI=true: " + "; ".join(info.reasons))
    skip = pytest.mark.skip(reason="no sandbox here: " + "; ".join(info.reasons))
    for item in items:
        if "needs_sandbox" in item.keywords:
            item.add_marker(skip)


class Server:
    def __init__(self) -> None:
        self.paths: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.paths.append(self.path)
                body = b"hello from 127.0.0.1\n"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                return

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "secrets").mkdir(parents=True)
    (ws / "secrets" / "token.txt").write_text("TOPSECRET\n")
    (ws / "notes.txt").write_text("public notes\n")
    (ws / "deploy.pem").write_text("PRIVATE KEY\n")
    return ws


@pytest.fixture
def no_helper(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No Landlock helper (as without a C compiler): bubblewrap alone, charter's Python
    bridging the proxy."""
    from charter.sandbox import landlock

    monkeypatch.setenv("CHARTER_LANDLOCK", "off")
    landlock.build_helper(refresh=True)
    yield
    monkeypatch.undo()
    landlock.build_helper(refresh=True)
