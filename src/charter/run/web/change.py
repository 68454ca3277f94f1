"""What a pending call would change, so an approval can be decided on the page.

- a file write or edit: the unified diff against the file as it is now in the run's
  workspace (read only inside the workspace: a path that resolves outside it, through
  ``..`` or a symlink, is not read and says so);
- a command: the command line;
- a GitHub merge: the pull request's diff summary and checks, from the webhook that
  started the run (GitHub's ``pull_request`` object: title, ``additions``, ``deletions``,
  ``changed_files``, head and base; ``check_runs`` or ``checks`` when the payload has them).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MAX_BYTES = 256_000
MAX_DIFF_LINES = 400


def _inside(workspace: Path, path: str) -> Path | None:
    root = Path(os.path.realpath(workspace))
    target = Path(os.path.realpath(root / path))
    return target if target == root or root in target.parents else None


def _current(workspace: Path | None, path: str) -> tuple[str | None, str | None]:
    """``(text, note)``: the file's text now (``None``: absent) or why it was not read."""
    if workspace is None:
        return None, "the run's workspace is not known to this console"
    target = _inside(workspace, path)
    if target is None:
        return None, f"{path} resolves outside the workspace: not read"
    if not target.exists():
        return None, None
    if not target.is_file():
        return None, f"{path} is not a regular file"
    if target.stat().st_size > MAX_BYTES:
        return None, f"{path} is larger than {MAX_BYTES} bytes: no diff"
    try:
        return target.read_text(encoding="utf-8"), None
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"{path} could not be read: {exc}"


def _diff(path: str, before: str, after: str) -> str:
    lines = list(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"a/{path}",
            tofile=f"b/{path}",
        )
    )
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"... {len(lines) - MAX_DIFF_LINES} more lines\n"]
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _pull_request(trigger: Mapping[str, Any] | None) -> dict[str, Any] | None:
    payload = (trigger or {}).get("payload")
    if not isinstance(payload, Mapping):
        return None
    pr = payload.get("pull_request")
    if not isinstance(pr, Mapping):
        return None
    checks = payload.get("check_runs") or payload.get("checks") or []
    return {
        "number": pr.get("number"),
        "title": pr.get("title"),
        "additions": pr.get("additions"),
        "deletions": pr.get("deletions"),
        "changed_files": pr.get("changed_files"),
        "head": (pr.get("head") or {}).get("ref") if isinstance(pr.get("head"), Mapping) else None,
        "base": (pr.get("base") or {}).get("ref") if isinstance(pr.get("base"), Mapping) else None,
        "url": pr.get("html_url"),
        "checks": [
            {"name": c.get("name"), "conclusion": c.get("conclusion") or c.get("status")}
            for c in checks
            if isinstance(c, Mapping)
        ],
    }


def would_change(
    tool: str, arguments: Mapping[str, Any], *, workspace: Path | None,
    trigger: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:  # fmt: skip
    """What the call would change: ``{"kind": "file"|"command"|"merge", ...}`` or ``None``."""
    path = arguments.get("path") or arguments.get("file_path")
    if isinstance(path, str) and isinstance(arguments.get("content"), str):
        before, note = _current(workspace, path)
        after = str(arguments["content"])
        return {
            "kind": "file",
            "path": path,
            "new_file": before is None and note is None,
            "diff": _diff(path, before or "", after) if note is None else None,
            "note": note,
        }
    if isinstance(path, str) and isinstance(arguments.get("old_string"), str):
        before, note = _current(workspace, path)
        old, new = str(arguments["old_string"]), str(arguments.get("new_string") or "")
        if before is not None and old in before:
            count = -1 if arguments.get("replace_all") else 1
            after = before.replace(old, new, count)
            diff = _diff(path, before, after)
        else:
            diff = _diff(path, old, new)
            note = note or f"{path}: the text to replace is not in the file now"
        return {"kind": "file", "path": path, "new_file": False, "diff": diff, "note": note}
    command = arguments.get("command") or arguments.get("cmd")
    if isinstance(command, str | list):
        text = command if isinstance(command, str) else " ".join(map(str, command))
        return {"kind": "command", "command": text, "cwd": arguments.get("cwd")}
    if str(arguments.get("action") or "") == "merge" or "merge" in tool:
        pr = _pull_request(trigger) or {}
        number = arguments.get("pr") or arguments.get("pull_number") or pr.get("number")
        return {"kind": "merge", "pr": number, "pull_request": pr or None}
    return None


__all__ = ["would_change"]
