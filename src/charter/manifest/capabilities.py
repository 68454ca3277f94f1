"""The host capability surface that persona ``capabilities`` are checked against.

A capability is ``namespace.operation``. charter ships a default surface; a manifest adds
operations with ``[check] host_capabilities`` (a list, or a table ``namespace = [ops]``)
and ``host_capabilities_path`` (a JSON, TOML or plain-text file).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import Collector, join
from .fields import type_name

#: charter's default host capability surface.
DEFAULT_HOST_CAPABILITIES: dict[str, tuple[str, ...]] = {
    "fs": ("read", "write", "list", "search", "delete", "move"),
    "git": (
        "get_diff",
        "status",
        "log",
        "blame",
        "show",
        "branch",
        "checkout",
        "commit",
        "push",
        "merge",
        "rebase",
        "tag",
        "get_branch",
    ),
    "project": (
        "test_commands",
        "build_commands",
        "lint_commands",
        "metadata",
        "dependencies",
        "scan",
        "lessons",
        "scope_test_command",
    ),
    "process": ("exec", "spawn", "kill"),
    "http": ("get", "post", "request"),
    "github": (
        "pr_read",
        "pr_comment",
        "pr_review",
        "pr_merge",
        "checks_read",
        "checks_rerun",
        "checks_write",
        "issue_read",
        "issue_write",
    ),
    "ci": ("read_logs", "rerun", "cancel"),
    "issues": ("read", "write", "comment"),
    "chat": ("read", "post"),
    "docs": ("read", "write"),
    "incident": ("read", "acknowledge", "annotate", "resolve", "trigger"),
    "metrics": ("query",),
    "logs": ("query",),
    "secrets": ("read",),
    "memory": ("recall", "remember", "forget"),
    "human": ("ask", "approve", "notify"),
    "handoff": ("dispatch", "receive"),
    "llm": ("complete", "escalate"),
    # the operations harn's own personas use (burin-labs/harn personas/*/harn.toml)
    "interaction": ("ask",),
    "runtime": ("approved_plan", "dry_run", "pipeline_input", "record_run", "task"),
    "workspace": ("read_text", "list"),
}


@dataclass(frozen=True, slots=True)
class CapabilityMeaning:
    """What one host capability is in charter: its side-effect level, the charter tools
    that perform it (none: "declared, no tool here"), and where charter does it instead."""

    level: str
    tools: tuple[str, ...] = ()
    note: str = ""


#: Side-effect level and charter tools of the catalog's operations that have a meaning
#: here; a capability not listed is declared with no charter tool behind it.
CAPABILITY_MEANINGS: dict[str, CapabilityMeaning] = {
    "fs.read": CapabilityMeaning("read_only", ("read",)),
    "fs.list": CapabilityMeaning("read_only", ("ls", "glob")),
    "fs.search": CapabilityMeaning("read_only", ("grep", "glob")),
    "fs.write": CapabilityMeaning("workspace_write", ("write", "edit", "multiedit")),
    "workspace.read_text": CapabilityMeaning("read_only", ("read",)),
    "workspace.list": CapabilityMeaning("read_only", ("ls", "glob")),
    "process.exec": CapabilityMeaning("process_exec", ("bash", "shell")),
    "http.get": CapabilityMeaning("network", ("webfetch",)),
    "human.ask": CapabilityMeaning("none", ("ask_user",)),
    "interaction.ask": CapabilityMeaning("none", ("ask_user",)),
    "memory.recall": CapabilityMeaning("read_only", ("recall",)),
    "memory.remember": CapabilityMeaning("workspace_write", ("remember",)),
    "memory.forget": CapabilityMeaning("workspace_write", ("forget",)),
    "git.get_branch": CapabilityMeaning(
        "read_only", note="a bash `git branch --show-current`, decided by the commands policy"
    ),
    "git.get_diff": CapabilityMeaning(
        "read_only", note="a bash `git diff`, decided by the commands policy"
    ),
    "project.scan": CapabilityMeaning("read_only", note="the workflow reads the tree (read, glob)"),
    "project.lessons": CapabilityMeaning("read_only", note="context_packs carry lessons"),
    "project.scope_test_command": CapabilityMeaning("read_only"),
    "project.test_commands": CapabilityMeaning("read_only"),
    "runtime.approved_plan": CapabilityMeaning(
        "none", note="charter's approval gate (autonomy tier, `charter approve`)"
    ),
    "runtime.dry_run": CapabilityMeaning(
        "none", note="RunContext.dry_run (the shadow / dry_run rollout arms)"
    ),
    "runtime.pipeline_input": CapabilityMeaning(
        "read_only", note="RunContext.trigger (the trigger envelope)"
    ),
    "runtime.record_run": CapabilityMeaning(
        "none", note="charter records every run itself (receipts, receipt_policy)"
    ),
    "runtime.task": CapabilityMeaning("none", note="the run's trigger and instructions"),
}


def capability_meaning(capability: str) -> CapabilityMeaning | None:
    """Level, tools and note of a ``namespace.operation``; ``None`` when charter gives it
    no meaning (an operation declared in ``[check] host_capabilities``, or a catalog
    operation no charter tool or run feature performs)."""
    return CAPABILITY_MEANINGS.get(capability)


_CAP_RE = re.compile(r"^(?P<ns>[a-z][a-z0-9_-]*)\.(?P<op>[a-z0-9_*][a-z0-9_*-]*)$")


class CapabilitySurface:
    """Known ``namespace.operation`` names; ``namespace.*`` is accepted for known namespaces."""

    def __init__(self, surface: Mapping[str, Iterable[str]] | None = None) -> None:
        base = DEFAULT_HOST_CAPABILITIES if surface is None else surface
        self.ops: dict[str, set[str]] = {ns: set(ops) for ns, ops in base.items()}
        self._checked: dict[str, str | None] = {}  # a fleet repeats its capabilities

    def add(self, capability: str) -> str | None:
        """Add one ``namespace.operation``; a message when it is malformed."""
        m = _CAP_RE.match(capability)
        if not m or "*" in capability:
            return f"expected 'namespace.operation' (e.g. git.get_diff), got {capability!r}"
        self.ops.setdefault(m["ns"], set()).add(m["op"])
        self._checked.clear()
        return None

    def check(self, capability: str) -> str | None:
        """A message when ``capability`` is malformed or not on the surface."""
        if capability in self._checked:
            return self._checked[capability]
        self._checked[capability] = found = self._check(capability)
        return found

    def _check(self, capability: str) -> str | None:
        m = _CAP_RE.match(capability)
        if not m:
            return (
                f"malformed capability {capability!r}; expected 'namespace.operation' "
                "(e.g. git.get_diff)"
            )
        ns, op = m["ns"], m["op"]
        if ns not in self.ops:
            return (
                f"unknown capability namespace {ns!r} in {capability!r}; known namespaces: "
                f"{', '.join(sorted(self.ops))} (declare more in [check] host_capabilities)"
            )
        if op == "*" or op in self.ops[ns]:
            return None
        return (
            f"unknown capability {capability!r}; {ns} offers {', '.join(sorted(self.ops[ns]))} "
            "(declare more in [check] host_capabilities)"
        )


def add_declared(surface: CapabilitySurface, value: Any, path: str, col: Collector) -> None:
    """Add ``[check] host_capabilities`` (a list of names or a table namespace = [ops])."""
    if isinstance(value, Mapping):
        for ns, ops in value.items():
            ops_path = join(path, str(ns))
            if not isinstance(ops, (list, tuple)):
                col.add(ops_path, f"expected a list of operations, got {type_name(ops)}")
                continue
            for i, op in enumerate(ops):
                if not isinstance(op, str) or not op.strip():
                    col.add(join(ops_path, i), "expected a non-blank operation name")
                    continue
                err = surface.add(f"{ns}.{op.strip()}")
                if err:
                    col.add(join(ops_path, i), err)
        return
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            col.add(join(path, i), "expected a non-blank 'namespace.operation' string")
            continue
        err = surface.add(item.strip())
        if err:
            col.add(join(path, i), err)


def load_capabilities_file(
    surface: CapabilitySurface, file: Path, path: str, col: Collector
) -> None:
    """Add the capabilities a file lists; an unreadable or malformed file is an error."""
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        col.add(
            path,
            f"cannot read host capabilities file {str(file)!r}: "
            f"{getattr(exc, 'strerror', None) or exc}",
        )
        return
    data: Any
    suffix = file.suffix.lower()
    import tomllib  # only with a host capabilities file

    try:
        if suffix == ".json":
            data = json.loads(text)
        elif suffix == ".toml":
            data = tomllib.loads(text)
        else:
            data = [line.strip() for line in text.splitlines()]
            data = [line for line in data if line and not line.startswith("#")]
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        col.add(path, f"host capabilities file {str(file)!r} is not valid {suffix[1:]}: {exc}")
        return
    if isinstance(data, Mapping) and set(data) == {"capabilities"}:
        data = data["capabilities"]
    if not isinstance(data, (list, tuple, Mapping)):
        col.add(path, f"host capabilities file {str(file)!r}: expected a list or a table")
        return
    file_col = Collector(col.manifest_path)
    add_declared(surface, data, "", file_col)
    for err in file_col.errors:
        col.add(path, f"host capabilities file {str(file)!r}: {err.field_path}: {err.message}")
