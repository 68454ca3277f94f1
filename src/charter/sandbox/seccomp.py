"""The seccomp filter that cuts a network-restricted sandbox off from unix sockets.

A network namespace leaves filesystem (pathname) unix sockets reachable: a Docker or
database socket under ``/var``, ``$HOME`` or the workspace is a way out of the sandbox
and, for Docker, onto the host. When the policy restricts the network, the sandboxed
process gets this classic-BPF filter (as Codex and sandbox-runtime do):

- ``socket(AF_UNIX, ...)`` fails with EPERM: no new unix socket, so no ``connect()`` or
  ``sendto()`` to a path. (seccomp cannot read the address ``connect()`` is given, so the
  socket is refused where it is made.)
- ``socketpair(AF_UNIX, ...)`` stays allowed for ``SOCK_STREAM`` (asyncio and
  multiprocessing use it; a connected stream pair cannot reach a path) and fails for
  datagram and seqpacket pairs (a datagram socket can ``sendto()`` a path).
- ``io_uring_setup``/``enter``/``register`` fail with ENOSYS: io_uring makes sockets and
  connects without the system calls this filter sees.
- system calls of another ABI (i386, x32 on x86-64) fail with EPERM: the filter judges
  the native numbers only.

The proxy's own socket stays reachable: charter's helper (or its Python bridge) forks the
process that relays the sandbox's proxy port to it *before* applying the filter.

The program is built here, once, and applied by ``landlock_exec -x HEX``; without the
helper by bubblewrap itself (``--seccomp FD``) or, when the Python bridge must keep its
own socket, by a few lines of Python through ``prctl`` (:data:`PY_APPLY`).
"""

from __future__ import annotations

import platform
import struct
from functools import lru_cache

# classic BPF
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_AND_K = 0x54
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_EPERM = 1
_ENOSYS = 38
_AF_UNIX = 1
_SOCK_STREAM = 1
_SOCK_TYPE_MASK = 0xF
# struct seccomp_data offsets: nr, arch, instruction pointer, args (low 32 bits first on
# the little-endian architectures below)
_NR, _ARCH, _ARG0, _ARG1 = 0, 4, 16, 24

#: ``(audit arch, socket, socketpair, x32 bit)`` per machine; io_uring's numbers are
#: the same everywhere (425-427).
_ARCHES: dict[str, tuple[int, int, int, int | None]] = {
    "x86_64": (0xC000003E, 41, 53, 0x40000000),
    "aarch64": (0xC00000B7, 198, 199, None),
}
_IO_URING = (425, 426, 427)


def _assemble(program: list[tuple[str, int, int, str | int, str | int]]) -> bytes:
    """``(label, code, k, jt, jf)`` rows, jumps by label or as 0: native sock_filters."""
    labels = {row[0]: i for i, row in enumerate(program) if row[0]}
    out = b""
    for i, (_, code, k, jt, jf) in enumerate(program):

        def off(target: str | int, here: int = i) -> int:
            return target if isinstance(target, int) else labels[target] - here - 1

        out += struct.pack("=HBBI", code, off(jt), off(jf), k)
    return out


@lru_cache(maxsize=4)
def unix_socket_filter(machine: str | None = None) -> bytes | None:
    """The filter for ``machine`` (default: this one), or None when charter has no
    system call numbers for it (the sandbox then refuses a restricted network)."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit, socket_nr, pair_nr, x32 = arch
    rows: list[tuple[str, int, int, str | int, str | int]] = [
        ("", _LD_W_ABS, _ARCH, 0, 0),
        ("", _JEQ_K, audit, 0, "deny"),
        ("", _LD_W_ABS, _NR, 0, 0),
    ]
    if x32 is not None:
        rows.append(("", _JGE_K, x32, "deny", 0))
    rows += [
        ("", _JEQ_K, socket_nr, "socket", 0),
        ("", _JEQ_K, pair_nr, "pair", 0),
        *(("", _JEQ_K, nr, "nosys", 0) for nr in _IO_URING),
        ("", _RET_K, _RET_ALLOW, 0, 0),
        ("socket", _LD_W_ABS, _ARG0, 0, 0),
        ("", _JEQ_K, _AF_UNIX, "deny", "allow"),
        ("pair", _LD_W_ABS, _ARG0, 0, 0),
        ("", _JEQ_K, _AF_UNIX, 0, "allow"),
        ("", _LD_W_ABS, _ARG1, 0, 0),
        ("", _AND_K, _SOCK_TYPE_MASK, 0, 0),
        ("", _JEQ_K, _SOCK_STREAM, "allow", "deny"),
        ("allow", _RET_K, _RET_ALLOW, 0, 0),
        ("deny", _RET_K, _RET_ERRNO | _EPERM, 0, 0),
        ("nosys", _RET_K, _RET_ERRNO | _ENOSYS, 0, 0),
    ]
    return _assemble(rows)


#: Python defining ``_apply_filter(hex)`` (no_new_privs, then ``prctl(PR_SET_SECCOMP,
#: SECCOMP_MODE_FILTER, &prog)``), for the proxy bridge used without charter's helper;
#: it exits 125 when the kernel refuses.
PY_APPLY = """
def _apply_filter(text):
    import ctypes, sys
    data = bytes.fromhex(text)
    libc = ctypes.CDLL(None, use_errno=True)
    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
    prog = Prog(len(data) // 8, data)
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:
        sys.stderr.write("charter-sandbox: seccomp refused: errno %d\\n" % ctypes.get_errno())
        sys.exit(125)
"""
