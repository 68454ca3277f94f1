"""The launch cache: a translated plan, reused while nothing it was computed from changed.

Building a plan imports the policy core and the manifest loader; that import alone is most
of a launch's start-up time. A plan is a pure function of its inputs (tool, persona,
options, user arguments, working directory, uid, the relevant environment) and of files
(persona folders and roots, charter.toml, includes, meta files, the CLIs' own config files,
PATH directories, every directory walked during discovery). The cache stores the plan with
the ``stat`` signature of each of those paths (mtime, size, inode, mode, owner; a
directory's mtime changes when an entry is added or removed) and is used only when every
signature still matches. ``CHARTER_LAUNCH_CACHE=0`` turns it off.

This module imports nothing from charter.policy or charter.manifest.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .job import TMP_TOKEN

CACHE_VERSION = 1
CACHE_ENV = "CHARTER_LAUNCH_CACHE"
_ENV_KEYS = (
    # the sandbox's endpoint hosts follow these (charter.launch.sandboxing.BASE_URL_VARS)
    "ANTHROPIC_BASE_URL",
    "OPENAI_BASE_URL",
    "GOOGLE_GEMINI_BASE_URL",
    "GEMINI_BASE_URL",
    "OPENCODE_BASE_URL",
    "HOME",
    "PATH",
    "TMPDIR",
    "XDG_CONFIG_HOME",
    "CODEX_HOME",
    "OPENCODE_CONFIG_CONTENT",
    "IS_SANDBOX",
)


def enabled(env: Mapping[str, str]) -> bool:
    return env.get(CACHE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def cache_dir(env: Mapping[str, str]) -> str:
    base = env.get("XDG_CACHE_HOME") or os.path.join(
        env.get("HOME") or os.path.expanduser("~"), ".cache"
    )
    return os.path.join(base, "charter", "launch")


def inputs(
    tool: str,
    persona: str,
    user_args: Sequence[str],
    options: Mapping[str, Any],
    env: Mapping[str, str],
    cwd: str,
) -> list[Any]:
    """Everything besides files that a plan depends on."""
    from charter import __version__

    relevant = {k: env[k] for k in sorted(env) if k in _ENV_KEYS or k.startswith("CHARTER_")}
    euid = os.geteuid() if hasattr(os, "geteuid") else -1
    return [
        CACHE_VERSION,
        __version__,
        _code_stamp(),
        tool,
        persona,
        list(user_args),
        dict(sorted(options.items())),
        os.path.realpath(cwd),
        euid,
        relevant,
    ]


_CODE_DIRS = ("launch", "launch/translate", "policy", "manifest", "sandbox")


def _code_stamp() -> int:
    """The newest mtime of the code a plan is computed by: an edited or reinstalled
    charter (same version, e.g. an editable install) never reuses a stale plan."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    newest = 0
    for sub in _CODE_DIRS:
        try:
            with os.scandir(os.path.join(root, sub)) as entries:
                for entry in entries:
                    if entry.name.endswith(".py"):
                        newest = max(newest, entry.stat().st_mtime_ns)
        except OSError:
            continue
    return newest


def _signature(dep: str) -> list[int] | None:
    """``stat`` signature; for a ``?``-prefixed path only existence, type, mode and owner
    (for busy directories such as the working directory, where only that matters)."""
    exists_only = dep.startswith("?")
    try:
        st = os.stat(dep[1:] if exists_only else dep)
    except OSError:
        return None
    if exists_only:
        return [0, 0, 0, st.st_mode, st.st_uid]
    return [st.st_mtime_ns, st.st_size, st.st_ino, st.st_mode, st.st_uid]


def _file(key: list[Any], env: Mapping[str, str]) -> tuple[str, str]:
    text = json.dumps(key, sort_keys=True)
    raw = text.encode()
    name = f"{zlib.crc32(raw):08x}{zlib.adler32(raw):08x}.json"
    return os.path.join(cache_dir(env), name), text


def lookup(key: list[Any], env: Mapping[str, str], tmpdir: str) -> dict[str, Any] | None:
    """The cached entry for ``key`` with ``tmpdir`` filled in, if it is still valid."""
    path, text = _file(key, env)
    try:
        with open(path, encoding="utf-8") as fh:
            raw = fh.read()
    except OSError:
        return None
    try:
        entry = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(entry, dict) or entry.get("key") != text:
        return None
    for dep, signature in entry.get("deps", []):
        if _signature(dep) != signature:
            return None
    filled: dict[str, Any] = json.loads(raw.replace(TMP_TOKEN, tmpdir))
    return filled


def store(
    key: list[Any],
    env: Mapping[str, str],
    data: Mapping[str, Any],
    deps: Iterable[str],
    tmpdir: str,
) -> None:
    """Save ``data`` (JSON-able; ``tmpdir`` is replaced by a token) with its dependencies."""
    import time

    path, text = _file(key, env)
    signed = [(d, _signature(d)) for d in sorted(set(deps))]
    recent = time.time_ns() - 2_000_000_000
    if any(sig is not None and sig[0] > recent for _, sig in signed):
        return  # changed in the last seconds: a later change could share the mtime
    entry = {"key": text, "deps": [[d, sig] for d, sig in signed], **data}
    body = json.dumps(entry)
    if tmpdir:
        body = body.replace(tmpdir, TMP_TOKEN)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(body)
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written is only slower
