"""Landlock inside the sandbox: a tiny C helper that applies the ruleset, then execs.

bubblewrap cannot apply Landlock, and a Python launcher inside the sandbox costs an
interpreter start per call (~100 ms). So charter ships ``landlock_exec.c`` and compiles
it on first use with the system's C compiler (``$CC``, else ``cc``/``gcc``/``clang``;
``-O2``, static when the C library allows) into a cache directory keyed by the source's
hash. bubblewrap then runs ``landlock_exec <rules> -- bash ...``: the kernel refuses
what the rules do not grant (EACCES), independently of the mounts. The same helper
also bridges the sandbox's loopback proxy port to charter's proxy socket (listening
before it execs the command, so nothing waits or polls).

No compiler, or no Landlock in the kernel: bubblewrap alone enforces the profile (the
mounts and namespaces are the primary mechanism; Landlock is defence in depth), and
``charter doctor`` says so. See :func:`landlock_args` for the rules derived from a profile.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from .profile import NetworkMode, SandboxProfile

SOURCE_NAME = "landlock_exec.c"
#: Loopback port of the proxy bridge inside the sandbox (also bwrap.PROXY_PORT).
_BRIDGE_PORT = 3128
#: Landlock ABI that first restricts TCP connect/bind; first with scopes (abstract unix
#: sockets, signals).
NET_ABI = 4
SCOPE_ABI = 6


@dataclass(frozen=True, slots=True)
class Helper:
    """The compiled helper (``path``) or why there is none (``reason``)."""

    path: str | None
    reason: str | None = None


def _source_path() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), SOURCE_NAME)


def helper_cache_dir() -> str:
    """Where compiled helpers live: ``$CHARTER_CACHE_DIR/sandbox``, else
    ``$XDG_CACHE_HOME/charter/sandbox``, else ``~/.cache/charter/sandbox``."""
    base = os.environ.get("CHARTER_CACHE_DIR")
    if base:
        return os.path.join(base, "sandbox")
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "charter", "sandbox")


def _compiler() -> list[str] | None:
    cc = os.environ.get("CC")
    if cc:
        return cc.split()
    for name in ("cc", "gcc", "clang"):
        found = shutil.which(name)
        if found:
            return [found]
    return None


#: Part of the cache key with the source: a change in how the helper is built rebuilds it.
_RECIPE = "-O2 -static, else -O2"
_LOCK = threading.Lock()
_HELPER: Helper | None = None


def build_helper(*, refresh: bool = False) -> Helper:
    """The helper binary, compiled on first use (cached per process and on disk).

    The binary's name carries the hash of the source, so an upgraded charter compiles
    its own; it is written to a temporary name and renamed, so concurrent first uses
    never see half a binary.
    """
    global _HELPER
    with _LOCK:
        if _HELPER is not None and not refresh:
            return _HELPER
        _HELPER = _build()
        return _HELPER


def _build() -> Helper:
    import hashlib  # here, not at the top: a compiled sandbox on disk needs none of these
    import subprocess
    import tempfile

    if os.environ.get("CHARTER_LANDLOCK") == "off":
        return Helper(None, "disabled by CHARTER_LANDLOCK=off")
    try:
        with open(_source_path(), "rb") as f:
            source = f.read()
    except OSError as exc:
        return Helper(None, f"helper source missing: {exc}")
    recipe = f"{_RECIPE}\0{os.uname().machine}".encode()
    digest = hashlib.sha256(source + recipe).hexdigest()[:16]
    directory = helper_cache_dir()
    target = os.path.join(directory, f"landlock_exec-{digest}")
    if os.access(target, os.X_OK):
        return Helper(target)
    compiler = _compiler()
    if compiler is None:
        return Helper(None, "no C compiler (cc, gcc or clang) to build the Landlock helper")
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".landlock_exec-", dir=directory)
        os.close(fd)
    except OSError as exc:
        return Helper(None, f"cannot write the helper cache {directory}: {exc}")
    try:
        # Static when the C library allows it: no dynamic loader at each exec (~0.15 ms
        # of the helper's ~0.4 ms per call); dynamic otherwise.
        for flags in (["-O2", "-static"], ["-O2"]):
            run = subprocess.run(
                [*compiler, *flags, "-o", tmp, _source_path()],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            if run.returncode == 0:
                break
        if run.returncode != 0:
            last = (run.stderr.strip().splitlines() or [f"exit {run.returncode}"])[-1]
            return Helper(None, f"compiling the Landlock helper failed: {last}")
        os.chmod(tmp, 0o755)
        os.replace(tmp, target)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Helper(None, f"compiling the Landlock helper failed: {exc}")
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return Helper(target)


# Where programs and their libraries live: readable even under a read allow-list, or no
# shell could start. Not $HOME, not /var, not /srv, not /mnt, not other users' trees.
SYSTEM_READ_ROOTS = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/nix/store",
    "/proc",
    "/sys",
)

# Configuration files in $HOME that programs refuse to run without reading once they
# exist (git exits on an unreadable ~/.gitconfig). Masked ones stay empty (bubblewrap).
HOME_READ_FILES = (".gitconfig", ".config/git", ".gitignore_global", ".inputrc")


@lru_cache(maxsize=32)
def path_roots(path_var: str, home: str) -> tuple[str, ...]:
    """Install prefixes of the directories on ``PATH`` (``~/.cargo/bin`` -> ``~/.cargo``):
    the programs a sandboxed shell finds must be able to read their own files. Kept per
    process: resolving them on every call costs more than the rest of the rules."""
    roots: list[str] = []
    for entry in path_var.split(os.pathsep):
        if not entry or not os.path.isabs(entry) or not os.path.isdir(entry):
            continue
        real = os.path.realpath(entry)
        parent = os.path.dirname(real)
        if os.path.basename(real) in ("bin", "sbin", "shims") and parent not in ("/", home):
            real = parent
        roots.append(real)
    return tuple(roots)


def _under(path: str, root: str) -> bool:
    return root == "/" or path == root or path.startswith(root.rstrip("/") + "/")


def _minimal(paths: Iterable[str]) -> list[str]:
    """``paths`` without those beneath another one (sorted by components, a path's
    descendants follow it directly, so one comparison with the last kept suffices)."""
    unique = set(paths)
    if "/" in unique:
        return ["/"]
    kept: list[str] = []
    for path in sorted(unique, key=lambda p: p.rstrip("/").split("/")):
        if not kept or not _under(path, kept[-1]):
            kept.append(path)
    return kept


def landlock_args(
    profile: SandboxProfile,
    abi: int,
    *,
    env: Mapping[str, str],
    private_dirs: Sequence[str] = (),
    extra_read: Sequence[str] = (),
) -> list[str]:
    """The helper's rule flags for ``profile`` on a kernel with Landlock ``abi``.

    - files: when the profile restricts reads or writes, ``-r`` for every readable root
      (the policy's read roots, :data:`SYSTEM_READ_ROOTS`, the prefixes of ``PATH``,
      :data:`HOME_READ_FILES`, the writable roots, ``extra_read``) and ``-w`` for every
      writable root, ``/dev`` and the sandbox's private directories (``/tmp``);
    - network ``NONE``: no TCP connect or bind (ABI 4); ``PROXY``: TCP connect only to
      the bridge port; both also scope abstract unix sockets and signals (ABI 6).
    """
    return list(
        _landlock_args(profile, abi, env.get("PATH", ""), tuple(private_dirs), tuple(extra_read))
    )


# The same profile, PATH and extra roots give the same rules: kept, since a shell call
# builds a new (equal) profile every time.
@lru_cache(maxsize=64)
def _landlock_args(
    profile: SandboxProfile,
    abi: int,
    path_var: str,
    private_dirs: tuple[str, ...],
    extra_read: tuple[str, ...],
) -> tuple[str, ...]:
    out: list[str] = []
    if profile.readable != ("/",) or profile.writable != ("/",):
        if profile.readable == ("/",):
            reads = ["/"]
        else:
            home = profile.home
            reads = [
                *profile.readable,
                *SYSTEM_READ_ROOTS,
                *path_roots(path_var, home),
                *(os.path.join(home, f) for f in HOME_READ_FILES),
                # what may be written may be read, except an unrestricted "/": writes
                # everywhere must not open reads everywhere (-w grants no read)
                *(w for w in profile.writable if w != "/"),
                *private_dirs,
                *extra_read,
                "/dev",
            ]
        writes = [*profile.writable, *private_dirs, "/dev"]
        # Roots that do not exist are skipped by the helper (no stat per root here).
        for path in _minimal(reads):
            out += ["-r", path]
        for path in _minimal(writes):
            out += ["-w", path]
    if profile.network is not NetworkMode.HOST and abi >= NET_ABI:
        out.append("-n")
        if profile.network is NetworkMode.PROXY:
            out += ["-c", str(_BRIDGE_PORT)]
        if abi >= SCOPE_ABI:
            out.append("-u")
    return tuple(out)


def bridge_args(proxy_socket: str) -> list[str]:
    """The helper's flag that bridges the sandbox's proxy port to ``proxy_socket``."""
    return ["-b", f"{_BRIDGE_PORT}:{proxy_socket}"]


def enforced(profile: SandboxProfile, abi: int | None) -> tuple[str, ...]:
    """What Landlock enforces for ``profile`` at ``abi`` (for receipts and doctor)."""
    if not abi:
        return ()
    out: list[str] = []
    if profile.readable != ("/",):
        out.append("reads")
    if profile.writable != ("/",):
        out.append("writes")
    if profile.network is not NetworkMode.HOST and abi >= NET_ABI:
        out.append("tcp")
    return tuple(out)
