"""The allow-listing HTTP(S) proxy: the only way out of a ``PROXY`` sandbox's network.

It listens on a unix socket (bound into the sandbox and bridged to a loopback port
there), accepts ``CONNECT host:port`` and absolute-form plain HTTP requests, and asks
:mod:`charter.policy` about every host: the network rules of the active frames decide,
nothing here. Each refusal is kept as a :class:`HostRefusal`.

Every proxy of the process is served by one asyncio loop in one daemon thread, started
on first use and kept: starting a proxy is then one listening socket on that loop (a
thread and a loop per shell call cost ~3 ms). Each proxy keeps its own socket, frames and
refusals, so concurrent shells under different policies never share a verdict or a
receipt. :func:`acquire_proxy` / :func:`release_proxy` keep idle proxies per network policy
for the next shell (one call at a time per proxy, so its refusals are that call's).
One proxy serves a one-shot shell or a long-lived CLI alike, from sync or async
code.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import re
import socket
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace

from charter.policy import Decision, Frame, Policy, ToolAnnotations, ToolCall, decide
from charter.policy.model import Rules
from charter.policy.network import HostError, parse_target

from .receipt import HostRefusal

_HEADER_LIMIT = 64 * 1024
_HOP_HEADERS = (b"proxy-connection:", b"connection:", b"proxy-authorization:")
_ANNOTATIONS = ToolAnnotations(kind="fetch", url_args=("url",))


def network_frames(frames: Sequence[Frame]) -> list[Frame]:
    """``frames`` reduced to their network rules (so only the network dimension decides)."""
    return [Frame(Policy(network=f.policy.network), label=f.label, kind=f.kind) for f in frames]


def address_frames(frames: Sequence[Frame]) -> list[Frame]:
    """``frames`` reduced to their network *deny* rules: what an address a name resolves
    to is judged by (the name itself was judged by the allow rules too)."""
    return [
        Frame(Policy(network=Rules(deny=f.policy.network.deny)), label=f.label, kind=f.kind)
        for f in frames
        if f.policy.network.deny
    ]


def decide_host(host: str, port: int, frames: Sequence[Frame]) -> Decision:
    """charter.policy's verdict on reaching ``host:port`` under ``frames``."""
    scheme = "https" if port == 443 else "http"
    call = ToolCall("sandbox.network", {"url": f"{scheme}://{_bracket(host)}:{port}"}, _ANNOTATIONS)
    return decide(call, frames)


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


#: A host as a request may spell it: a DNS name (letters, digits, ``-``, ``_``, ``.``) or
#: a bracketed IPv6 literal. Anything else (``allowed.com#.evil.com``, ``a.com\\@b``, a
#: space) is refused, never handed to a resolver.
_HOST_SYNTAX = re.compile(r"\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+")


def _split_hostport(text: str, default_port: int) -> tuple[str, int]:
    """``(canonical host, port)`` of an authority: the host as ``charter.policy`` parses it,
    which is also exactly what the proxy dials."""
    text = text.strip()
    if text.startswith("["):
        raw, _, rest = text[1:].partition("]")
        raw = f"[{raw}]"
        port = rest[1:] if rest.startswith(":") else rest
    elif text.count(":") == 1:
        raw, _, port = text.partition(":")
    else:
        raw, port = text, ""
    if not raw or not _HOST_SYNTAX.fullmatch(raw):
        raise ValueError(f"not a host name or address: {raw!r}")
    if port and not port.isdigit():
        raise ValueError(f"bad port {port!r}")
    number = int(port) if port else default_port
    if not 0 < number < 65536:
        raise ValueError("bad port")
    try:
        host, _ = parse_target(f"http://{raw}/")
    except HostError as exc:
        raise ValueError(str(exc)) from None
    return host, number


@dataclass(frozen=True, slots=True)
class _Target:
    host: str  # canonical: what was decided and what is dialled
    port: int
    connect: bool
    head: bytes  # what to send upstream first (rewritten request head), empty for CONNECT


_DROPPED_HEADERS = (b"proxy-connection:", b"connection:", b"proxy-authorization:", b"host:")


def _parse_head(head: bytes) -> _Target:
    lines = head.split(b"\r\n")
    method, target, version = lines[0].decode("latin-1").split(" ", 2)
    if method.upper() == "CONNECT":
        host, port = _split_hostport(target, 443)
        return _Target(host, port, True, b"")
    if not target.lower().startswith("http://"):
        raise ValueError("only CONNECT and absolute http:// requests are proxied")
    authority = target[7:].split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    if "@" in authority or "\\" in authority:
        raise ValueError("credentials in a proxied URL are refused")
    host, port = _split_hostport(authority, 80)
    path = target[7 + len(authority) :].split("#", 1)[0]
    if not path.startswith("/"):
        path = "/" + path
    # The client's Host header is dropped: the request names the host it was judged by.
    headers = [line for line in lines[1:] if line and not line.lower().startswith(_DROPPED_HEADERS)]
    shown = f"[{host}]" if ":" in host else host
    host_header = f"Host: {shown}{'' if port == 80 else f':{port}'}".encode("latin-1")
    first = f"{method} {path} {version}".encode("latin-1")
    rebuilt = b"\r\n".join([first, host_header, *headers, b"Connection: close", b"", b""])
    return _Target(host, port, False, rebuilt)


_LOOP: asyncio.AbstractEventLoop | None = None
_LOOP_LOCK = threading.Lock()


def _shared_loop() -> asyncio.AbstractEventLoop:
    """The loop every proxy of this process is served on (started once, never stopped)."""
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None or not _LOOP.is_running():
            loop = asyncio.new_event_loop()
            ready = threading.Event()
            loop.call_soon(ready.set)
            thread = threading.Thread(target=loop.run_forever, name="charter-proxy", daemon=True)
            thread.start()
            ready.wait()
            _LOOP = loop
        return _LOOP


class NetworkProxy:
    """An allow-listing proxy for ``frames`` on a unix socket; start it, then use ``socket_path``.

    Use as a context manager or call :meth:`start` / :meth:`stop`. ``refusals`` lists every
    host refused so far; :meth:`take_refusals` returns and clears them (one receipt per call).
    """

    def __init__(
        self,
        frames: Sequence[Frame],
        *,
        socket_dir: str | None = None,
        sock: socket.socket | None = None,
        socket_path: str | None = None,
    ) -> None:
        self.frames = network_frames(frames)
        # ``sock``: a unix socket already bound to ``socket_path`` and listening (the
        # caller owns its directory); else a fresh private directory and socket.
        self._sock = sock
        if sock is not None:
            if socket_path is None:
                raise ValueError("NetworkProxy(sock=...) needs the socket_path it is bound to")
            self._dir: str | None = None
            self.socket_path = socket_path
        else:
            self._dir = tempfile.mkdtemp(prefix="charter-proxy-", dir=socket_dir)
            self.socket_path = os.path.join(self._dir, "proxy.sock")
        self.refusals: list[HostRefusal] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def __enter__(self) -> NetworkProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Bind the socket and serve it on the shared proxy loop (returns once listening)."""
        if self._server is not None:
            return
        loop = _shared_loop()

        async def listen() -> asyncio.AbstractServer:
            if self._sock is not None:
                return await asyncio.start_unix_server(self._serve, sock=self._sock)
            return await asyncio.start_unix_server(self._serve, path=self.socket_path)

        self._server = asyncio.run_coroutine_threadsafe(listen(), loop).result(timeout=10)
        self._loop = loop
        if self._sock is None:
            os.chmod(self.socket_path, 0o600)

    def stop(self) -> None:
        """Stop serving: close the socket, end this proxy's connections, remove the socket."""
        loop, server = self._loop, self._server
        if loop is not None and server is not None and loop.is_running():

            async def shutdown() -> None:
                server.close()
                for task in list(self._tasks):
                    task.cancel()

            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout=5)
        self._server = self._loop = None
        with contextlib.suppress(OSError):
            os.unlink(self.socket_path)
        if self._dir is not None:
            with contextlib.suppress(OSError):
                os.rmdir(self._dir)

    @property
    def serving(self) -> bool:
        """True while the socket is listening."""
        return self._server is not None and self._loop is not None and self._loop.is_running()

    def end_connections(self) -> None:
        """End the connections in progress (none once a sandboxed call has returned)."""
        loop = self._loop
        if not self._tasks or loop is None or not loop.is_running():
            return

        async def cancel() -> None:
            for task in list(self._tasks):
                task.cancel()

        asyncio.run_coroutine_threadsafe(cancel(), loop).result(timeout=5)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._handle(reader, writer)
        finally:
            self._tasks.discard(task)

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
            addresses: list[str] = []
            if decision.allowed:
                try:
                    addresses = await _resolve(target.host, target.port)
                except OSError as exc:
                    writer.write(_response(502, f"cannot resolve {target.host}: {exc}"))
                    return
                decision = self._judge_addresses(target, addresses) or decision
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
                up_reader, up_writer = await _dial(addresses, target.port)
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

    def _judge_addresses(self, target: _Target, addresses: Sequence[str]) -> Decision | None:
        """The first denial of an address ``target.host`` resolves to (a name pointing at
        a denied address: ``127.0.0.1.nip.io``, a rebinding DNS server), else None."""
        frames = address_frames(self.frames)
        if not frames:
            return None
        for address in addresses:
            if address == target.host:
                continue  # an address literal, judged as the target itself
            verdict = decide_host(address, target.port, frames)
            if not verdict.allowed:
                return replace(
                    verdict, reason=f"{target.host} resolves to {address}: {verdict.reason}"
                )
        return None


async def _resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to now (all judged; the one dialled is among them)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    out: list[str] = []
    for *_, sockaddr in infos:
        address = str(sockaddr[0])
        if address not in out:
            out.append(address)
    if not out:
        raise OSError(f"{host} has no address")
    return out


async def _dial(
    addresses: Sequence[str], port: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect to the first of the judged ``addresses`` that answers: never a second lookup
    of the name, which a rebinding DNS server could answer differently."""
    error: OSError | None = None
    for address in addresses:
        try:
            return await asyncio.open_connection(address, port)
        except OSError as exc:
            error = exc
    raise error or OSError("no address")


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


# Idle, listening proxies by network rules (frames reduced to what decides a host).
_IDLE: dict[tuple[object, ...], list[NetworkProxy]] = {}
_IDLE_LOCK = threading.Lock()
#: How many idle proxies the process keeps, all policies together.
IDLE_MAX = 8


def _pool_key(frames: Sequence[Frame]) -> tuple[object, ...]:
    return tuple((f.label, f.kind, f.policy.network) for f in frames)


def acquire_proxy(frames: Sequence[Frame]) -> NetworkProxy:
    """A started proxy for ``frames``: an idle one kept by :func:`release_proxy` when
    there is one (no socket to bind, ~1.5 ms saved per shell call), else a new one.
    The caller has it to itself until it releases it."""
    key = _pool_key(frames)
    with _IDLE_LOCK:
        idle = _IDLE.get(key)
        proxy = idle.pop() if idle else None
    if proxy is not None and proxy.serving:
        return proxy
    proxy = NetworkProxy(frames)
    proxy.start()
    return proxy


def release_proxy(proxy: NetworkProxy) -> list[HostRefusal]:
    """Give ``proxy`` back after a call; returns the refusals recorded during it.

    Connections still open are ended first (the sandboxed processes are gone), so
    nothing of this call reaches the next one; beyond :data:`IDLE_MAX` idle proxies it
    is stopped instead.
    """
    proxy.end_connections()
    refusals = proxy.take_refusals()
    with _IDLE_LOCK:
        if proxy.serving and sum(len(v) for v in _IDLE.values()) < IDLE_MAX:
            _IDLE.setdefault(_pool_key(proxy.frames), []).append(proxy)
            return refusals
    proxy.stop()
    return refusals


@atexit.register
def _stop_idle() -> None:
    with _IDLE_LOCK:
        idle = [p for group in _IDLE.values() for p in group]
        _IDLE.clear()
    for proxy in idle:
        with contextlib.suppress(Exception):
            proxy.stop()
