"""What sandboxing this machine can do, probed once per process."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
import zlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .bwrap import bwrap_path

_LANDLOCK_CREATE_RULESET = 444  # syscall number on x86_64 and aarch64 alike
_LANDLOCK_CREATE_RULESET_VERSION = 1


@dataclass(frozen=True, slots=True)
class Availability:
    """``ok`` when bubblewrap can build a sandbox here; ``proxy_ok`` when, in addition,
    the network can be routed through charter's proxy."""

    ok: bool
    bwrap: str | None
    version: str | None
    proxy_ok: bool
    landlock_abi: int | None
    reasons: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "bwrap": self.bwrap,
            "version": self.version,
            "proxy_ok": self.proxy_ok,
            "landlock_abi": self.landlock_abi,
            "reasons": list(self.reasons),
        }


@lru_cache(maxsize=1)
def landlock_abi() -> int | None:
    """The kernel's Landlock ABI version, or None (not Linux, not built in, or disabled).

    Kept on disk per boot (it cannot change before a reboot): asking the kernel needs
    ctypes, a few milliseconds of import in every ``charter launch``."""
    if not sys.platform.startswith("linux"):
        return None
    from charter.sandbox.landlock import helper_cache_dir

    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            key = f"{fh.read().strip()}\0{os.uname().release}\0{os.geteuid()}"
    except OSError:
        return _ask_landlock_abi()
    raw = key.encode()
    cache = os.path.join(
        helper_cache_dir(), f"abi-{zlib.crc32(raw):08x}{zlib.adler32(raw):08x}.json"
    )
    try:
        with open(cache, encoding="utf-8") as fh:
            data = json.load(fh)
        if data.get("key") == key:
            abi = data.get("abi")
            return abi if isinstance(abi, int) and abi > 0 else None
    except (OSError, ValueError, AttributeError):
        pass
    found = _ask_landlock_abi()
    with contextlib.suppress(OSError):
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        tmp = f"{cache}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"key": key, "abi": found}, fh)
        os.replace(tmp, cache)
    return found


def _ask_landlock_abi() -> int | None:
    import ctypes  # only when asked: most imports of charter never probe the kernel

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        version = int(
            libc.syscall(_LANDLOCK_CREATE_RULESET, None, 0, _LANDLOCK_CREATE_RULESET_VERSION)
        )
    except (OSError, AttributeError):
        return None
    return version if version > 0 else None


def install_hint() -> str:
    """How to get bubblewrap on this system (the distribution's package)."""
    for manager, command in (
        ("apt-get", "sudo apt-get install bubblewrap gcc"),
        ("dnf", "sudo dnf install bubblewrap gcc"),
        ("pacman", "sudo pacman -S bubblewrap gcc"),
        ("apk", "sudo apk add bubblewrap gcc musl-dev"),
        ("zypper", "sudo zypper install bubblewrap gcc"),
    ):
        if shutil.which(manager):
            return command
    return (
        "install the 'bubblewrap' package of your distribution (and a C compiler: "
        "Landlock and a fast proxy bridge)"
    )


#: How long a successful probe stays valid on disk (a launch is a new process each time).
PROBE_TTL_S = 3600
_USERNS_SYSCTLS = (
    "/proc/sys/kernel/unprivileged_userns_clone",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
    "/proc/sys/user/max_user_namespaces",
)


def _probe_key(binary: str) -> str:
    """What a probe's answer depends on: the binary, the kernel, the user, the sysctls
    (stored whole in the cache file and compared: the file name is only a checksum)."""
    parts = [binary, os.uname().release, str(os.getuid())]
    try:
        st = os.stat(binary)
        parts += [str(st.st_mtime_ns), str(st.st_size)]
    except OSError:
        parts.append("missing")
    for path in _USERNS_SYSCTLS:
        try:
            with open(path, encoding="ascii") as fh:
                parts.append(fh.read().strip())
        except OSError:
            parts.append("-")
    return "\0".join(parts)


@lru_cache(maxsize=8)
def _probe(binary: str) -> tuple[bool, str | None, str | None]:
    """The probe, or its cached success from an earlier process (two subprocesses saved
    per ``charter launch``). Only successes are cached: a sandbox that cannot be made is
    probed again every time, and a cached success that became wrong fails closed when
    bubblewrap itself then refuses to start."""
    from charter.sandbox.landlock import helper_cache_dir

    key = _probe_key(binary)
    raw = key.encode()
    cache = os.path.join(
        helper_cache_dir(), f"probe-{zlib.crc32(raw):08x}{zlib.adler32(raw):08x}.json"
    )
    try:
        with open(cache, encoding="utf-8") as fh:
            data = json.load(fh)
        if data.get("key") == key and time.time() - float(data["at"]) < PROBE_TTL_S:
            return True, data.get("version"), None
    except (OSError, ValueError, KeyError, TypeError):
        pass
    result = _run_probe(binary)
    if result[0]:
        with contextlib.suppress(OSError):
            os.makedirs(os.path.dirname(cache), exist_ok=True)
            tmp = f"{cache}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump({"key": key, "at": time.time(), "version": result[1]}, fh)
            os.replace(tmp, cache)
    return result


def _run_probe(binary: str) -> tuple[bool, str | None, str | None]:
    import subprocess

    try:
        version = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()
        run = subprocess.run(
            [
                binary,
                "--ro-bind",
                "/",
                "/",
                "--dev",
                "/dev",
                "--proc",
                "/proc",
                "--unshare-net",
                "--unshare-pid",
                "--die-with-parent",
                "--",
                "/bin/true",
            ],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, None, f"{binary} cannot run: {exc}"
    if run.returncode != 0:
        detail = (
            run.stderr.strip().splitlines()[-1] if run.stderr.strip() else f"exit {run.returncode}"
        )
        return (
            False,
            version or None,
            (
                f"{binary} cannot create namespaces here ({detail}); unprivileged user "
                "namespaces may be disabled (kernel.unprivileged_userns_clone, "
                "kernel.apparmor_restrict_unprivileged_userns)"
            ),
        )
    return True, version or None, None


def available(*, refresh: bool = False) -> Availability:
    """Probe bubblewrap (a real sandboxed ``/bin/true``) and Landlock; cached."""
    if refresh:
        _probe.cache_clear()
        landlock_abi.cache_clear()
    reasons: list[str] = []
    if not sys.platform.startswith("linux"):
        return Availability(False, None, None, False, None, ("OS sandboxing needs Linux",))
    binary = bwrap_path()
    ok = False
    version = None
    if binary is None:
        reasons.append(f"bubblewrap (bwrap) is not installed: {install_hint()}")
    else:
        ok, version, problem = _probe(binary)
        if problem:
            reasons.append(problem)
    # The proxy bridge is charter's helper, or its own Python without a C compiler.
    return Availability(ok, binary, version, ok, landlock_abi(), tuple(reasons))


def diagnostics() -> list[dict[str, Any]]:
    """``charter doctor`` rows (``check``, ``status``, ``detail``) for sandboxing."""
    from .landlock import NET_ABI, build_helper  # compiles on first use

    info = available()
    helper = build_helper()
    bridge = "charter's helper" if helper.path else "Python (install a C compiler: faster start)"
    if info.landlock_abi and helper.path:
        landlock = {
            "status": "ok",
            "detail": f"kernel Landlock ABI {info.landlock_abi}, applied inside bubblewrap by "
            f"{helper.path}: writes, reads under a read allow-list"
            + (", TCP when the network is restricted" if info.landlock_abi >= NET_ABI else ""),
        }
    else:
        why = helper.reason if info.landlock_abi else "not available in this kernel"
        landlock = {
            "status": "warn",
            "detail": f"not applied ({why}); bubblewrap alone enforces the sandbox",
        }
    rows: list[dict[str, Any]] = [
        {
            "check": "bubblewrap",
            "status": "ok" if info.ok else "warn",
            "detail": f"{info.version} at {info.bwrap}"
            if info.ok
            else "; ".join(info.reasons)
            + " (bash tools under path/network policies will refuse to run)",
        },
        {
            "check": "sandbox network proxy",
            "status": "ok" if info.proxy_ok else "warn",
            "detail": ("network.allow domains go through charter's proxy, bridged by " + bridge)
            if info.proxy_ok
            else "unavailable: " + "; ".join(info.reasons),
        },
        {"check": "landlock", **landlock},
    ]
    return rows
