"""The compiled sandbox kept on disk, and the proxy that starts when first needed.

Each cache test has a hostile case (something changed that must change the profile: it
does) and an allowed twin (nothing changed: the stored profile is used, not rebuilt).
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from charter.policy import Frame, Policy
from charter.sandbox import build_profile
from charter.sandbox.compiled import compile_sandbox
from charter.sandbox.pending import PendingProxy

from .conftest import Server

POLICY = {"paths": {"deny": ["*.key", "./secrets/**"]}, "network": {"deny": ["*"]}}


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CHARTER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CHARTER_SANDBOX_CACHE", raising=False)
    return tmp_path / "cache"


def _compile(ws: Path, home: Path) -> tuple[bool, tuple[str, ...]]:
    got = compile_sandbox(POLICY, str(ws), home=str(home), landlock=False)
    return got.cached, got.profile.masked


def _backdate(*paths: Path) -> None:
    past = time.time() - 3600
    for path in paths:
        os.utime(path, (past, past))


def test_unchanged_inputs_reuse_the_stored_profile(workspace: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (workspace / "src").mkdir()
    _backdate(workspace, workspace / "src", workspace / "secrets")
    cached, first = _compile(workspace, home)
    assert cached is False and str(workspace / "secrets") in first
    cached, second = _compile(workspace, home)
    assert cached is True and second == first


def test_a_new_denied_file_is_masked_even_with_the_mtime_set_back(
    workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    sub = workspace / "src"
    sub.mkdir()
    _backdate(workspace, sub, workspace / "secrets")
    time.sleep(2.1)  # ctimes old enough for the signatures to be trusted (not relisted)
    policy = Policy.from_dict(POLICY)
    build_profile(policy, str(workspace), home=str(home))  # the in-process listings, kept
    cached, masked = _compile(workspace, home)
    assert _compile(workspace, home)[0] is True
    assert str(sub / "new.key") not in masked
    before = os.stat(sub)
    (sub / "new.key").write_text("SECRET\n")
    # what a sandboxed process could do to hide it: put the directory's mtime back
    os.utime(sub, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(sub).st_mtime_ns == before.st_mtime_ns
    cached, masked = _compile(workspace, home)
    assert cached is False and str(sub / "new.key") in masked
    # in-process too: the listing kept for the bash tool's next call is not reused
    assert str(sub / "new.key") in build_profile(policy, str(workspace), home=str(home)).masked


def test_a_changed_symlink_or_literal_path_rebuilds(workspace: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "id.key").write_text("SECRET\n")
    (elsewhere / "plain.txt").write_text("fine\n")
    (workspace / "link").symlink_to(elsewhere / "plain.txt")
    _backdate(workspace, workspace / "secrets")
    cached, masked = _compile(workspace, home)
    assert str(elsewhere / "id.key") not in masked
    # the link now points at a denied file: its directory's entries are the same
    os.unlink(workspace / "link")
    (workspace / "link").symlink_to(elsewhere / "id.key")
    _backdate(workspace)
    cached, masked = _compile(workspace, home)
    assert cached is False and str(elsewhere / "id.key") in masked
    # a literal denied path that did not exist, now does
    cached, masked = _compile(workspace, home)
    assert cached is True
    (workspace / "secrets").rename(workspace / "old-secrets")
    cached, masked = _compile(workspace, home)
    assert cached is False and str(workspace / "secrets") not in masked


def test_the_cache_can_be_turned_off(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    _backdate(workspace, workspace / "secrets")
    assert _compile(workspace, home)[0] is False
    assert _compile(workspace, home)[0] is True
    monkeypatch.setenv("CHARTER_SANDBOX_CACHE", "0")
    assert _compile(workspace, home)[0] is False


def _ask(path: str, request: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(path)
        s.sendall(request)
        chunks = []
        while data := s.recv(65536):
            chunks.append(data)
    return b"".join(chunks)


def _frames() -> list[Frame]:
    return [Frame(Policy.from_dict({"network": {"allow": ["127.0.0.1"]}}), label="persona")]


def test_a_connection_before_the_proxy_serves_waits_and_is_decided(server: Server) -> None:
    """The first connection arrives while the proxy is not loaded yet (a long delay): it
    waits in the backlog, then the policy decides it, the refused one and the allowed twin."""
    pending = PendingProxy(_frames, warm_after=60)
    try:
        assert not pending.ready.is_set()
        denied = _ask(pending.socket_path, b"CONNECT evil.example:443 HTTP/1.1\r\n\r\n")
        assert denied.startswith(b"HTTP/1.1 403")
        request = f"GET http://127.0.0.1:{server.port}/x HTTP/1.1\r\nHost: x\r\n\r\n"
        allowed = _ask(pending.socket_path, request.encode())
        assert b"hello from 127.0.0.1" in allowed and server.paths == ["/x"]
        assert [r.host for r in pending.take_refusals()] == ["evil.example"]
    finally:
        pending.close()
    assert not os.path.exists(pending.socket_path)


def test_a_proxy_that_cannot_start_refuses_every_connection() -> None:
    def broken() -> list[Frame]:
        raise RuntimeError("no policy")

    pending = PendingProxy(broken, warm_after=0)
    assert pending.wait(10) is None and isinstance(pending.error, RuntimeError)
    with pytest.raises(OSError), socket.socket(socket.AF_UNIX) as s:
        s.settimeout(5)
        s.connect(pending.socket_path)
        s.sendall(b"CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n")
        if not s.recv(100):
            raise ConnectionResetError("closed without an answer")
    pending.close()


def test_closing_before_any_connection_never_loads_the_proxy() -> None:
    pending = PendingProxy(_frames, warm_after=60)
    assert pending.close() == []
    assert pending.wait(5) is None and pending.error is None
    assert not os.path.exists(pending.socket_path)
