"""Class 1 of issue 29: pathname unix sockets under a restricted network.

A network namespace does not cut a sandboxed process off from a listener at a path
(``/var/tmp/x.sock``, under ``$HOME``, inside the workspace): a Docker or database
socket is a host escape. With the network restricted the kernel refuses unix sockets to
the sandboxed process (a seccomp filter applied by charter's helper, or by its Python
without one), while the proxy keeps its own. Checked at the listener.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import POLICY, run, sh

pytestmark = pytest.mark.needs_sandbox


class Listener:
    """A unix stream (and datagram) listener recording what reaches it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.received: list[bytes] = []
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(str(path))
        self.srv.listen(8)
        self.srv.settimeout(0.2)
        self.dgram_path = path.with_name(path.name + ".dgram")
        self.dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.dgram.bind(str(self.dgram_path))
        self.dgram.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            with contextlib.suppress(OSError):
                conn, _ = self.srv.accept()
                with conn:
                    conn.settimeout(2)
                    self.received.append(conn.recv(100))
            with contextlib.suppress(OSError):
                self.received.append(self.dgram.recv(100))

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.srv.close()
        self.dgram.close()


@pytest.fixture
def listeners(tmp_path: Path) -> Iterator[list[Listener]]:
    ws = tmp_path / "ws"
    ws.mkdir()
    var_dir = Path(tempfile.mkdtemp(prefix="charter-sock-", dir="/var/tmp"))
    home_dir = Path(tempfile.mkdtemp(prefix=".charter-sock-", dir=Path.home()))
    made = [Listener(var_dir / "x.sock"), Listener(home_dir / "x.sock"), Listener(ws / "x.sock")]
    yield made
    for listener in made:
        listener.close()
    shutil.rmtree(var_dir)
    shutil.rmtree(home_dir)


def _deliver(path: Path) -> str:
    return (
        'python3 -c "import socket\n'
        "try:\n"
        "  s = socket.socket(socket.AF_UNIX); s.connect('" + str(path) + "'); s.sendall(b'pwned')\n"
        "  print('sent')\n"
        "except OSError as e: print('refused', e)\n"
        "try:\n"
        "  a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
        "  a.sendto(b'pwned', '" + str(path) + ".dgram'); print('sent')\n"
        "except OSError as e: print('refused', e)\n"
        "a, b = socket.socketpair(); a.sendall(b'ok'); print('pair', b.recv(2))\"\n"
    )


def _attack(ws: Path, listeners: list[Listener], policy: dict[str, Any]) -> list[Any]:
    return run(ws, *(sh(_deliver(listener.path)) for listener in listeners), policy=policy)


def test_no_unix_socket_reaches_a_listener_when_the_network_is_denied(
    listeners: list[Listener],
) -> None:
    ws = listeners[2].path.parent
    obs = _attack(ws, listeners, POLICY)
    for result in obs:
        assert "sent" not in result["stdout"], result
        assert "refused" in result["stdout"]
        assert "pair b'ok'" in result["stdout"]  # the allowed twin: a socketpair still works
    assert [listener.received for listener in listeners] == [[], [], []]


def test_proxied_network_refuses_unix_sockets_but_keeps_the_proxy(
    listeners: list[Listener],
) -> None:
    from tests.sandbox.conftest import Server

    server = Server()
    try:
        ws = listeners[2].path.parent
        policy = {**POLICY, "network": {"allow": ["127.0.0.1"]}}
        policy["commands"] = {"allow": [*POLICY["commands"]["allow"], "curl:*"]}
        obs = _attack(ws, listeners, policy)
        assert all("sent" not in result["stdout"] for result in obs), obs
        assert [listener.received for listener in listeners] == [[], [], []]
        twin = run(ws, sh(f"curl -s -m 5 http://127.0.0.1:{server.port}/ok"), policy=policy)
        assert twin[0]["stdout"] == "hello from 127.0.0.1\n", twin
    finally:
        server.close()


def test_allowed_twin_unrestricted_network_reaches_the_listener(
    listeners: list[Listener],
) -> None:
    ws = listeners[2].path.parent
    open_net = {k: v for k, v in POLICY.items() if k != "network"}
    obs = _attack(ws, listeners[:1], open_net)
    assert obs[0]["stdout"].count("sent") == 2, obs
    assert sorted(listeners[0].received) == [b"pwned", b"pwned"]


def test_without_the_helper_the_filter_still_applies(
    listeners: list[Listener], monkeypatch: pytest.MonkeyPatch
) -> None:
    from charter.sandbox import landlock

    monkeypatch.setenv("CHARTER_LANDLOCK", "off")
    landlock.build_helper(refresh=True)
    try:
        ws = listeners[2].path.parent
        obs = _attack(ws, listeners, POLICY)
        assert all("sent" not in r["stdout"] and "pair b'ok'" in r["stdout"] for r in obs), obs
        assert [listener.received for listener in listeners] == [[], [], []]
    finally:
        monkeypatch.undo()
        landlock.build_helper(refresh=True)
