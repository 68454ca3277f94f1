"""Typed receipts: what the sandbox stopped, or why no sandbox could be made."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any


@dataclass(frozen=True, slots=True)
class HostRefusal:
    """The proxy refused ``host:port`` because charter.policy denied it."""

    host: str
    port: int
    reason: str
    rule: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "port": self.port, "reason": self.reason, "rule": self.rule}


@dataclass(frozen=True, slots=True)
class SandboxReceipt:
    """What happened to one sandboxed run.

    ``refused_hosts`` are known exactly (the proxy saw them); ``refused_paths`` are what
    the process reported as read-only or missing under a masked or read-only mount
    (best effort: read from its stderr; with Landlock restricting reads, also what it
    reported as permission denied); ``network`` is the profile's network mode;
    ``landlock`` what Landlock enforced on top of bubblewrap (``reads``, ``writes``,
    ``tcp``; empty when it was not applied, and ``notes`` says why).
    """

    mechanism: str
    exit_code: int | None
    network: str
    refused_hosts: tuple[HostRefusal, ...] = ()
    refused_paths: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())
    landlock: tuple[str, ...] = ()

    @property
    def stopped_something(self) -> bool:
        return bool(self.refused_hosts or self.refused_paths)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "sandbox",
            "mechanism": self.mechanism,
            "exit_code": self.exit_code,
            "network": self.network,
            "refused_hosts": [h.to_dict() for h in self.refused_hosts],
            "refused_paths": list(self.refused_paths),
            "notes": list(self.notes),
            "landlock": list(self.landlock),
        }


@dataclass(frozen=True, slots=True)
class SandboxUnavailable:
    """No sandbox could be made where the policy needs one: the command did not run."""

    reasons: tuple[str, ...]
    needed_for: tuple[str, ...]
    #: What to do about it (default: install bubblewrap, or opt out of the sandbox).
    hint: str = (
        'install bubblewrap (see `charter doctor`), or set sandbox = "off" in the '
        "persona's policy to run shells unsandboxed"
    )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "sandbox_unavailable",
            "reasons": list(self.reasons),
            "needed_for": list(self.needed_for),
            "hint": self.hint,
        }

    @property
    def message(self) -> str:
        return (
            "refused: the policy restricts "
            + " and ".join(self.needed_for)
            + " but no OS sandbox can be made ("
            + "; ".join(self.reasons)
            + "); "
            + self.hint
        )


# Compiled on first use (most receipts have no stderr to read): a sandboxed launch pays
# for none of them.
@lru_cache(maxsize=1)
def _patterns() -> tuple[re.Pattern[str], ...]:
    return tuple(
        re.compile(p)
        for p in (
            r"(?:^|[\s'`\"])(/[^\s'`\":]+|[^\s'`\":]+)['`\"]?: Read-only file system",
            # Python's spelling: "[Errno 30] Read-only file system: '/path'".
            r"Read-only file system: '([^']+)'",
            r"(?:^|[\s'`\"])(/[^\s'`\":]+|[^\s'`\":]+)['`\"]?: Permission denied",
            r"Permission denied: '([^']+)'",
        )
    )


def refused_paths_from(stderr: str, limit: int = 20, *, denied: bool = False) -> tuple[str, ...]:
    """Paths a process reported as on a read-only file system (what the sandbox refused),
    and with ``denied`` (Landlock restricts reads) also those it reported permission denied."""
    if not stderr:
        return ()
    erofs, erofs_py, eacces, eacces_py = _patterns()
    hits = [m.group(1) for m in erofs.finditer(stderr)]
    hits += [m.group(1) for m in erofs_py.finditer(stderr)]
    if denied:
        hits += [m.group(1) for m in eacces.finditer(stderr)]
        hits += [m.group(1) for m in eacces_py.finditer(stderr)]
    found = dict.fromkeys(hits)
    return tuple(found)[:limit]
