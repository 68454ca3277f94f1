"""Host-side file access for the built-in tools: open exactly what the policy decided on.

The ``read``/``write``/``edit``/``glob``/``grep`` tools run in the charter process, outside
any sandbox, so a race between deciding on a path and opening it is a hole: a concurrent
``bash`` call (or any process) can swap a symlink or rename a directory in between. The
rule here is *decide on the resolved name, open that name without following anything,
then check the kernel's name for what was opened*:

1. :func:`decide_path` resolves the argument once (``charter.policy.resolve_target``) and
   asks ``charter.policy`` about that symlink-free absolute name;
2. :func:`open_no_follow` opens that name with ``openat2(RESOLVE_BENEATH |
   RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`` (Linux 5.6+; elsewhere one ``O_NOFOLLOW``
   open per component), so a symlink planted since the decision fails the open (``ELOOP``);
3. :func:`check_opened` reads the kernel's name for the descriptor (``/proc/self/fd``): a
   directory renamed between the decision and the open shows up as a different name, and
   the call is refused. ``fstat`` refuses anything but a regular file (a FIFO would block
   the loop forever, ``/dev/zero`` never ends).

Writes go to a temporary file in the same directory (opened through the directory's
descriptor) and are renamed over the target, so a failure never leaves a file
half-written. Walks (``glob``, ``grep``) go from directory descriptor to directory
descriptor without following links and stop at a :class:`Deadline`.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import secrets
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from charter.errors import CharterError
from charter.policy import (
    BUILTIN_TOOLS,
    PathContext,
    ToolCall,
    decide_current,
    resolve_target,
)

#: openat2(2) is syscall 437 on every Linux architecture (the unified numbering).
_SYS_OPENAT2 = 437
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08


class _OpenHow(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


class HostFileError(CharterError, PermissionError):
    """A host-side file operation refused: denied by the policy, raced, or not a file."""


class DeadlineExceeded(CharterError, TimeoutError):
    """A built-in tool ran past its deadline."""


@dataclass
class Deadline:
    """A point in time a tool must finish by (``clock`` is injectable for tests)."""

    seconds: float
    what: str
    clock: Callable[[], float] = time.monotonic
    _end: float = field(init=False)

    def __post_init__(self) -> None:
        self._end = self.clock() + self.seconds

    def check(self) -> None:
        if self.clock() > self._end:
            raise DeadlineExceeded(f"{self.what} exceeded its deadline of {self.seconds:g} s")


_openat2: Callable[..., int] | None = None
_openat2_missing = False


def _load_openat2() -> Callable[..., int] | None:
    global _openat2, _openat2_missing
    if _openat2 is None and not _openat2_missing:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fn = libc.syscall
            fn.restype = ctypes.c_long
            fn.argtypes = [
                ctypes.c_long,
                ctypes.c_int,
                ctypes.c_char_p,
                ctypes.POINTER(_OpenHow),
                ctypes.c_size_t,
            ]
            _openat2 = fn
        except (OSError, AttributeError):
            _openat2_missing = True
    return _openat2


def _via_openat2(target: str, flags: int, mode: int) -> int | None:
    """``openat2`` from ``/`` with no symlinks at all; None when the kernel lacks it."""
    global _openat2_missing
    fn = _load_openat2()
    if fn is None:
        return None
    tmpfile = getattr(os, "O_TMPFILE", 0)  # includes O_DIRECTORY's bit: compare whole
    creates = bool(flags & os.O_CREAT) or (tmpfile and flags & tmpfile == tmpfile)
    how = _OpenHow(
        flags | os.O_CLOEXEC,
        mode if creates else 0,  # openat2 refuses a mode without O_CREAT/O_TMPFILE
        _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS,
    )
    root = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fd = fn(_SYS_OPENAT2, root, os.fsencode(target.lstrip("/") or "."), how, 24)
    finally:
        os.close(root)
    if fd >= 0:
        return int(fd)
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EPERM) and not flags & os.O_CREAT:
        # no openat2 here (old kernel, or a seccomp filter that refuses it): walk instead
        _openat2_missing = True
        return None
    raise OSError(err, os.strerror(err), target)


def _via_walk(target: str, flags: int, mode: int) -> int:
    """One ``O_NOFOLLOW`` open per component, each relative to the previous directory."""
    parts = [p for p in target.split("/") if p]
    directory = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    if not parts:
        return fd
    try:
        for part in parts[:-1]:
            inner = os.open(part, directory, dir_fd=fd)
            os.close(fd)
            fd = inner
        return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)
    finally:
        os.close(fd)


def open_no_follow(target: str, flags: int, mode: int = 0o644) -> int:
    """Open the absolute, resolved ``target`` following no symlink at any component.

    ``target`` came out of ``resolve_target``, so it has no links: one met now was planted
    after the decision, and the open fails with ``ELOOP``/``ENOTDIR`` instead of following it.
    """
    if not target.startswith("/") or "\x00" in target:
        raise HostFileError(f"refusing to open {target!r}: not an absolute resolved path")
    try:
        fd = _via_openat2(target, flags, mode)
        return fd if fd is not None else _via_walk(target, flags, mode)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EXDEV):
            raise HostFileError(
                f"'{target}' changed after the policy decided on it (a symlink appeared on "
                "the way); refused"
            ) from None
        raise


def kernel_name(fd: int) -> str | None:
    """What the kernel calls the file behind ``fd`` now (None without ``/proc``)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def check_opened(fd: int, target: str, *, regular: bool = True) -> os.stat_result:
    """Refuse ``fd`` unless it is still ``target`` (and, with ``regular``, a regular file).

    A directory on the way renamed between the decision and the open leaves the name
    symlink-free but names another file: the kernel's own name for the descriptor tells.
    Without ``/proc`` the descriptor's inode is compared with ``target``'s instead.
    """
    st = os.fstat(fd)
    name = kernel_name(fd)
    if name is not None:
        moved = name != target
    else:
        try:
            now = os.stat(target, follow_symlinks=False)
            moved = (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino)
        except OSError:
            moved = True
    if moved:
        raise HostFileError(
            f"'{target}' was moved or replaced after the policy decided on it; refused"
        )
    if regular and not stat.S_ISREG(st.st_mode):
        raise HostFileError(f"'{target}' is {_kind(st.st_mode)}, not a regular file; refused")
    return st


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


def decide_path(ctx: PathContext, path: str, tool: str, *, as_given: bool = False) -> str:
    """Resolve ``path`` once and ask the policy about the resolved name: the name to open.

    The dispatcher decided on the argument; this decides again on what it resolves to *now*,
    so what is opened next (without following links) is exactly what was decided. With
    ``as_given`` the unresolved name is decided too (a walked entry that is a symlink:
    ``.env -> notes.txt`` is denied by its name).
    """
    target = resolve_target(path, ctx)
    names = (target, path) if as_given and path != target else (target,)
    for name in names:
        args: dict[str, str] = {"path": name}
        if tool == "edit":
            args.update(old_string="", new_string="")
        elif tool == "write":
            args["content"] = ""
        decision = decide_current(ToolCall(tool, args, BUILTIN_TOOLS[tool]), context=ctx)
        if not decision.allowed:
            raise HostFileError(decision.reason or f"'{name}' is denied")
    return target


def read_bytes(target: str, limit: int) -> bytes:
    """At most ``limit`` bytes of the regular file ``target`` (decided), opened safely.

    ``O_NONBLOCK`` keeps the open of a FIFO from waiting for a writer; ``check_opened``
    then refuses it.
    """
    fd = open_no_follow(target, os.O_RDONLY | os.O_NONBLOCK)
    try:
        check_opened(fd, target)
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        left = limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _open_dir_creating(directory: str) -> int:
    """A descriptor on ``directory`` (resolved), creating missing components without
    following links; the kernel's name for it must be ``directory``."""
    parts = [p for p in directory.split("/") if p]
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            try:
                inner = os.open(part, flags, dir_fd=fd)
            except FileNotFoundError:
                os.mkdir(part, 0o777, dir_fd=fd)
                inner = os.open(part, flags, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise HostFileError(
                        f"'{directory}' changed after the policy decided on it; refused"
                    ) from None
                raise
            os.close(fd)
            fd = inner
        check_opened(fd, directory, regular=False)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_atomic(target: str, data: bytes) -> None:
    """Replace ``target`` (decided) by ``data``: a temporary file in the same directory,
    renamed over it, so a failure leaves the old content whole.

    The directory is opened without following links and everything after goes through its
    descriptor. An existing target must be a regular file (a FIFO, device, directory or a
    symlink planted since the decision is refused); its permission bits are kept.
    """
    directory, _, name = target.rpartition("/")
    if not name or name in (".", ".."):
        raise HostFileError(f"'{target}' names no file")
    dfd = _open_dir_creating(directory or "/")
    tmp = f".{name}.{secrets.token_hex(6)}.charter-tmp"
    try:
        mode = 0o666 & ~_umask()
        try:
            old = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            old = None
        if old is not None:
            if not stat.S_ISREG(old.st_mode):
                what = "a symlink" if stat.S_ISLNK(old.st_mode) else _kind(old.st_mode)
                raise HostFileError(f"'{target}' is {what}, not a regular file; refused")
            mode = stat.S_IMODE(old.st_mode)
        fd = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
            dir_fd=dfd,
        )
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)
        raise
    finally:
        os.close(dfd)


def _umask() -> int:
    # The process umask (read by setting it; there is no getter before Python 3.13's os).
    current = os.umask(0o022)
    os.umask(current)
    return current


@dataclass(frozen=True, slots=True)
class Entry:
    """A file met by :func:`walk_files`: its path, relative path and whether it is a link."""

    path: str
    rel: str
    is_link: bool


def walk_files(
    root: str, deadline: Deadline, *, max_depth: int | None = None, max_entries: int = 200_000
) -> Iterator[Entry]:
    """Regular files and symlinks under the resolved directory ``root``, sorted per
    directory, from descriptor to descriptor (a directory symlink is never entered, a
    directory swapped for one mid-walk fails its ``O_NOFOLLOW`` open and is skipped).

    Stops with :class:`DeadlineExceeded` at the deadline, and refuses to go past
    ``max_entries`` (a tree the model filled to exhaust the walk fails the call)."""
    fd = open_no_follow(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        check_opened(fd, root, regular=False)
    except BaseException:
        os.close(fd)
        raise
    seen = [0]
    yield from _walk(fd, root, "", deadline, max_depth, max_entries, seen)


def _walk(
    fd: int,
    path: str,
    rel: str,
    deadline: Deadline,
    depth_left: int | None,
    max_entries: int,
    seen: list[int],
) -> Iterator[Entry]:
    try:
        with os.scandir(fd) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            deadline.check()
            seen[0] += 1
            if seen[0] > max_entries:
                raise DeadlineExceeded(f"more than {max_entries} entries under the search root")
            child, child_rel = f"{path.rstrip('/')}/{entry.name}", f"{rel}{entry.name}"
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                if (depth_left is not None and depth_left <= 1) or len(rel) > 4096:
                    continue
                try:
                    sub = os.open(entry.name, _DIR_NOFOLLOW, dir_fd=fd)
                except OSError:  # swapped for a link or removed since the listing
                    continue
                yield from _walk(
                    sub,
                    child,
                    child_rel + "/",
                    deadline,
                    None if depth_left is None else depth_left - 1,
                    max_entries,
                    seen,
                )
            elif stat.S_ISREG(mode) or stat.S_ISLNK(mode):
                yield Entry(child, child_rel, stat.S_ISLNK(mode))
    finally:
        os.close(fd)


_DIR_NOFOLLOW = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
