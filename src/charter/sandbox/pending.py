"""A proxy socket that listens at once and is served when the sandbox first needs it.

The allow-listing proxy (:class:`charter.sandbox.proxy.NetworkProxy`) needs asyncio and
:mod:`charter.policy`, about 40 ms of imports, before it can decide a host. A launched CLI
needs the proxy's socket to exist when bubblewrap starts (it is bound into the sandbox),
but makes its first connection hundreds of milliseconds later (Node starts, reads its
config, ...). :class:`PendingProxy` binds and listens on the socket synchronously (well
under a millisecond), and a daemon thread waits, without holding the GIL, for the first
connection or :data:`WARM_AFTER_S` (whichever comes first: the CLI's own start-up is not
slowed by the imports, and the proxy is usually ready before the first request), then
loads the proxy and serves the socket. A connection made before the proxy serves waits
in the socket's backlog; nothing passes undecided: every connection is answered by the
proxy and :mod:`charter.policy`, or, when the proxy cannot start, refused (the socket is
closed). A process that exits before either never pays for the proxy.
"""

from __future__ import annotations

import _socket
import os
import select
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from charter.policy import Frame

    from .proxy import NetworkProxy
    from .receipt import HostRefusal

#: Seconds after which the proxy starts even without a connection (warm for the first one).
WARM_AFTER_S = 0.25
_BACKLOG = 128


#: The longest unix socket path the kernel binds (``sun_path`` is 108 bytes with the NUL).
_SUN_PATH_MAX = 107


def _socket_dir() -> str:
    """A fresh private directory (mode 0700) for the socket, like ``tempfile.mkdtemp``:
    under ``$TMPDIR`` when the socket's path fits a unix socket address there, else /tmp."""
    base = os.environ.get("TMPDIR") or "/tmp"
    # charter-proxy-<12 hex>/proxy.sock
    if len(os.fsencode(base)) + len("/charter-proxy-000000000000/proxy.sock") > _SUN_PATH_MAX:
        base = "/tmp"
    for _ in range(100):
        path = os.path.join(base, f"charter-proxy-{os.urandom(6).hex()}")
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"no free name for a proxy socket directory in {base}")


class PendingProxy:
    """A listening unix socket whose :class:`NetworkProxy` starts in the background.

    ``frames`` is called in the background thread (building frames may import the policy
    engine). Duck-types the parts of :class:`NetworkProxy` a :class:`Sandbox` uses:
    ``socket_path``, :meth:`take_refusals`; :meth:`close` ends it.
    """

    def __init__(
        self, frames: Callable[[], Sequence[Frame]], *, warm_after: float = WARM_AFTER_S
    ) -> None:
        self._frames = frames
        self._warm_after = warm_after
        self._dir = _socket_dir()
        self.socket_path = os.path.join(self._dir, "proxy.sock")
        # the C module: ``socket`` costs milliseconds of enum set-up to import
        self._sock: _socket.socket = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            self._sock.bind(self.socket_path)
            os.chmod(self.socket_path, 0o600)
            self._sock.listen(_BACKLOG)
        except OSError:
            self._sock.close()
            self._cleanup()
            raise
        self._wake_r, self._wake_w = os.pipe()
        self._wake_open = True
        self._lock = threading.Lock()
        self._closed = False
        self._proxy: NetworkProxy | None = None
        self.error: BaseException | None = None
        self.ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="charter-proxy-start", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            # without the GIL until a connection waits, the delay passes, or close()
            select.select([self._sock.fileno(), self._wake_r], [], [], self._warm_after)
            with self._lock:
                if self._closed:
                    return
            import socket

            from .proxy import NetworkProxy

            with self._lock:
                if self._closed:
                    return
                sock = socket.socket(fileno=self._sock.detach())
                self._sock = sock  # the same listening socket, as asyncio wants it
            proxy = NetworkProxy(self._frames(), sock=sock, socket_path=self.socket_path)
            with self._lock:
                if self._closed:
                    sock.close()
                    return
                proxy.start()
                self._proxy = proxy
        except BaseException as exc:  # fail closed: waiting clients are refused
            with self._lock:
                if not self._closed:  # after close(), a closed descriptor is expected
                    self.error = exc
                self._sock.close()
        finally:
            with self._lock:  # the thread owns the wake pipe from here on
                for fd in (self._wake_r, self._wake_w):
                    os.close(fd)
                self._wake_open = False
            self.ready.set()

    def wait(self, timeout: float | None = None) -> NetworkProxy | None:
        """The serving proxy once it started (None if it failed or was closed first)."""
        self.ready.wait(timeout)
        return self._proxy

    def take_refusals(self) -> list[HostRefusal]:
        """Hosts refused so far (none before the proxy serves: nothing was decided)."""
        with self._lock:
            proxy = self._proxy
        return proxy.take_refusals() if proxy is not None else []

    def close(self) -> list[HostRefusal]:
        """Stop serving (or never start) and remove the socket; the last refusals."""
        with self._lock:
            self._closed = True
            proxy = self._proxy
            if self._wake_open:
                os.write(self._wake_w, b"x")  # the thread, if still waiting, ends
            if proxy is None:
                self._sock.close()
        refusals: list[HostRefusal] = []
        if proxy is not None:
            refusals = proxy.take_refusals()
            proxy.stop()
        self._cleanup()
        if self.error is not None:
            print(
                f"charter: the sandbox's network proxy did not start: {self.error}",
                file=sys.stderr,
            )
        return refusals

    def _cleanup(self) -> None:
        for remove, path in ((os.unlink, self.socket_path), (os.rmdir, self._dir)):
            try:
                remove(path)
            except OSError:
                continue


__all__ = ["PendingProxy"]
