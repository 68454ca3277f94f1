"""The allow-listing HTTP(S) proxy: the only way out of a ``PROXY`` sandbox's network.

It listens on a unix socket (bound into the sandbox and bridged to a loopback port
there), accepts ``CONNECT host:port`` and absolute-form plain HTTP requests, and asks
:mod:`charter.policy` about every host: the network rules of the active frames decide,
nothing here. Each refusal is kept as a :class:`HostRefusal`.

It runs its own asyncio loop in a daemon thread, so one proxy serves a one-shot shell
or a long-lived CLI alike, from sync or async code.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from charter.policy import Decision, Frame, Policy, ToolAnnotations, ToolCall, decide

from .receipt import HostRefusal

_HEADER_LIMIT = 64 * 1024
_HOP_HEADERS = (b"proxy-connection:", b"connection:", b"proxy-authorization:")
_ANNOTATIONS = ToolAnnotations(kind="fetch", url_args=("url",))


def network_frames(frames: Sequence[Frame]) -> list[Frame]:
    """``frames`` reduced to their network rules (so only the network dimension decides)."""
    return [Frame(Policy(network=f.policy.network), label=f.label, kind=f.kind) for f in frames]


def decide_host(host: str, port: int, frames: Sequence[Frame]) -> Decision:
    """charter.policy's verdict on reaching ``host:port`` under ``frames``."""
    scheme = "https" if port == 443 else "http"
    call = ToolCall("sandbox.network", {"url": f"{scheme}://{_bracket(host)}:{port}"}, _ANNOTATIONS)
    return decide(call, frames)


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _split_hostport(text: str, default_port: int) -> tuple[str, int]:
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:
        host, port = text, ""
    if not host:
        raise ValueError("no host")
    number = int(port) if port else default_port
    if not 0 < number < 65536:
        raise ValueError("bad port")
    return host, number


@dataclass(frozen=True, slots=True)
class _Target:
    host: str
    port: int
    connect: bool
    head: bytes  # what to send upstream first (rewritten request head), empty for CONNECT


def _parse_head(head: bytes) -> _Target:
    lines = head.split(b"\r\n")
    method, target, version = lines[0].decode("latin-1").split(" ", 2)
    if method.upper() == "CONNECT":
        host, port = _split_hostport(target, 443)
        return _Target(host, port, True, b"")
    if not target.lower().startswith("http://"):
        raise ValueError("only CONNECT and absolute http:// requests are proxied")
    rest = target[7:]
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        raise ValueError("credentials in a proxied URL are refused")
    host, port = _split_hostport(authority, 80)
    headers = [
        line
        for line in lines[1:]
        if line
        and not line.lower().startswith(
            (b"proxy-connection:", b"connection:", b"proxy-authorization:")
        )
    ]
    first = f"{method} /{path if slash else ''} {version}".encode("latin-1")
    rebuilt = b"\r\n".join([first, *headers, b"Connection: close", b"", b""])
    return _Target(host, port, False, rebuilt)


class NetworkProxy:
    """An allow-listing proxy for ``frames`` on a unix socket; start it, then use ``socket_path``.

    Use as a context manager or call :meth:`start` / :meth:`stop`. ``refusals`` lists every
    host refused so far; :meth:`take_refusals` returns and clears them (one receipt per call).
    """

    def __init__(self, frames: Sequence[Frame], *, socket_dir: str | None = None) -> None:
        self.frames = network_frames(frames)
        self._dir = tempfile.mkdtemp(prefix="charter-proxy-", dir=socket_dir)
        self.socket_path = os.path.join(self._dir, "proxy.sock")
        self.refusals: list[HostRefusal] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None

    def __enter__(self) -> NetworkProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Bind the socket and serve in a background thread (returns once listening)."""
        if self._thread is not None:
            return
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_unix_server(self._handle, path=self.socket_path)
                )
                os.chmod(self.socket_path, 0o600)
            except BaseException as exc:  # reported to start()'s caller
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="charter-proxy", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread = None
            raise failure[0]

    def stop(self) -> None:
        """Stop serving and remove the socket."""
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None:

            async def shutdown() -> None:
                if self._server is not None:
                    self._server.close()
                for task in asyncio.all_tasks():
                    if task is not asyncio.current_task():
                        task.cancel()

            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout=5)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
        self._thread = self._loop = None
        for path in (self.socket_path, self._dir):
            with contextlib.suppress(OSError):
                os.rmdir(path) if path == self._dir else os.unlink(path)

    def take_refusals(self) -> list[HostRefusal]:
        """The refusals recorded since the last call (and forget them)."""
        with self._lock:
            out, self.refusals = self.refusals, []
        return out

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                return
            if len(head) > _HEADER_LIMIT:
                return
            try:
                target = _parse_head(head)
            except (ValueError, UnicodeError) as exc:
                writer.write(_response(400, f"charter sandbox proxy: {exc}"))
                return
            decision = decide_host(target.host, target.port, self.frames)
            if not decision.allowed:
                with self._lock:
                    self.refusals.append(
                        HostRefusal(target.host, target.port, decision.reason, decision.rule)
                    )
                writer.write(
                    _response(403, f"charter policy refused {target.host}: {decision.reason}")
                )
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(target.host, target.port)
            except OSError as exc:
                writer.write(_response(502, f"cannot reach {target.host}:{target.port}: {exc}"))
                return
            if target.connect:
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            else:
                up_writer.write(target.head)
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            with contextlib.suppress(RuntimeError):
                writer.close()


def _response(status: int, text: str) -> bytes:
    body = (text + "\n").encode("utf-8", "replace")
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    return (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode("latin-1") + body


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(RuntimeError):
            writer.close()
