"""Built-in tools: read, write, edit, glob, grep, bash, ask_user.

Each carries the annotations of :data:`charter.policy.BUILTIN_TOOLS`, so every path and
command argument is decided by the policy core before the handler runs; the loop also
pushes a ``workspace`` frame that confines path arguments to the workspace. Handlers
resolve relative paths against the workspace.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from charter.policy import (
    BUILTIN_TOOLS,
    PathContext,
    ToolCall,
    decide_current,
    make_context,
    resolve_target,
)
from charter.sandbox import run_command, shell_argv

from .tools import Tool

_MAX_READ = 200_000
_MAX_MATCHES = 200


def _resolve(ctx: PathContext, path: str) -> Path:
    # The policy's own resolver: the handler opens exactly the file the policy decided on.
    return Path(resolve_target(path, ctx))


def _open_resolved(target: Path, flags: int, mode: int = 0o644) -> int:
    """Open the path the policy decided on, following no symlink at any component.

    ``resolve_target`` already resolved every link, so a link met now was planted after
    the decision (a swapped file *or* a swapped parent directory): the walk from ``/``
    opens each directory with ``O_NOFOLLOW`` relative to the previous one and fails
    (``ELOOP``/``ENOTDIR``) instead of following it.
    """
    parts = target.parts
    if not target.is_absolute() or len(parts) < 2:
        raise OSError(f"refusing to open {target!s}: not an absolute resolved path")
    directory = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[1:-1]:
            inner = os.open(part, directory, dir_fd=fd)
            os.close(fd)
            fd = inner
        return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)
    finally:
        os.close(fd)


def _read_text(target: Path, errors: str = "strict") -> str:
    fd = _open_resolved(target, os.O_RDONLY)
    with os.fdopen(fd, "r", encoding="utf-8", errors=errors) as handle:
        return handle.read()


def _write_text(target: Path, text: str) -> None:
    fd = _open_resolved(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def _relative_pattern(pattern: str) -> None:
    parts = Path(pattern).parts
    if Path(pattern).is_absolute() or ".." in parts:
        raise ValueError("pattern must be relative to 'path' and may not contain '..'")


def builtin_tools(
    workspace: str | None = None,
    *,
    ask_user: Callable[[str], Any] | None = None,
    bash_timeout_s: float = 120.0,
    names: tuple[str, ...] = ("read", "write", "edit", "glob", "grep", "bash", "ask_user"),
) -> list[Tool]:
    """The built-in tools bound to ``workspace`` (default: the working directory)."""
    ws = os.path.realpath(workspace or os.getcwd())
    ctx = make_context(ws)

    def read(path: str, offset: int = 0, limit: int | None = None) -> str:
        """Read a UTF-8 text file (optionally a line range)."""
        lines = _read_text(_resolve(ctx, path), errors="replace").splitlines()
        chosen = lines[offset : offset + limit if limit else None]
        return "\n".join(chosen)[:_MAX_READ]

    def write(path: str, content: str) -> dict[str, Any]:
        """Create or overwrite a file with ``content``."""
        target = _resolve(ctx, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        _write_text(target, content)
        return {"status": "ok", "path": path, "bytes": len(content.encode("utf-8"))}

    def edit(path: str, old_string: str, new_string: str, replace_all: bool = False) -> Any:
        """Replace ``old_string`` by ``new_string`` in a file (exactly once unless replace_all)."""
        target = _resolve(ctx, path)
        text = _read_text(target)
        count = text.count(old_string)
        if count == 0:
            return {"status": "error", "error": "old_string not found"}
        if count > 1 and not replace_all:
            return {"status": "error", "error": f"old_string occurs {count} times; be specific"}
        text = text.replace(old_string, new_string, -1 if replace_all else 1)
        _write_text(target, text)
        return {"status": "ok", "path": path, "replacements": count if replace_all else 1}

    def glob(pattern: str, path: str = ".") -> list[str]:
        """Files under ``path`` matching a glob ``pattern`` (``**`` recurses)."""
        _relative_pattern(pattern)
        root = _resolve(ctx, path)
        _refuse_denied_root(root, pattern)
        # Listing is reading: a name is returned only when reading that file is allowed.
        out = sorted(
            os.path.relpath(p, ws) for p in root.glob(pattern) if p.is_file() and _readable(p)
        )
        return out[:_MAX_MATCHES]

    def _readable(file: Path) -> bool:
        # Every file grep opens is decided like a ``read`` of it (sensitive files included).
        call = ToolCall("read", {"path": str(file)}, BUILTIN_TOOLS["read"])
        return decide_current(call, context=ctx).allowed

    def _refuse_denied_root(root: Path, pattern: str) -> None:
        # A pattern whose literal prefix lies in a denied tree is refused outright.
        literal: list[str] = []
        for part in Path(pattern).parts:
            if any(ch in part for ch in "*?["):
                break
            literal.append(part)
        base = root.joinpath(*literal) if literal else root
        if not _readable(base):
            raise PermissionError(f"'{os.path.relpath(base, ws)}' lies in a denied tree")

    def grep(pattern: str, path: str = ".", include: str | None = None) -> list[str]:
        """Lines matching a regular expression, as ``file:line:text``."""
        regex = re.compile(pattern)
        if include:
            _relative_pattern(include)
        root = _resolve(ctx, path)
        _refuse_denied_root(root, "")
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        out: list[str] = []
        for file in files:
            if include and not fnmatch.fnmatch(file.name, include):
                continue
            if not _readable(file):
                continue
            try:
                lines = file.read_text(encoding="utf-8").splitlines()
            except (UnicodeDecodeError, OSError):
                continue
            for number, line in enumerate(lines, 1):
                if regex.search(line):
                    out.append(f"{os.path.relpath(file, ws)}:{number}:{line}")
                    if len(out) >= _MAX_MATCHES:
                        return out
        return out

    async def bash(command: str) -> dict[str, Any]:
        """Run a bash command in the workspace; returns exit code, stdout and stderr."""
        # The shell the policy parses (bash, no start-up files), inside the OS sandbox
        # built from the active policy stack: what the policy could not see in the text,
        # the kernel still stops. No sandbox where the policy needs one: refused.
        return await run_command(shell_argv(command), workspace=ws, timeout_s=bash_timeout_s)

    async def ask_user_tool(question: str) -> Any:
        """Ask the human user a question and wait for the answer."""
        if ask_user is None:
            return {"status": "error", "error": "no user is attached to this agent"}
        answer = ask_user(question)
        if asyncio.iscoroutine(answer):
            answer = await answer
        return answer

    params = {
        "read": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "offset": {"type": "integer"},
                "limit": {"type": "integer"},
            },
            "required": ["path"],
        },
        "write": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
        "edit": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
                "replace_all": {"type": "boolean"},
            },
            "required": ["path", "old_string", "new_string"],
        },
        "glob": {
            "type": "object",
            "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}},
            "required": ["pattern"],
        },
        "grep": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "path": {"type": "string"},
                "include": {"type": "string"},
            },
            "required": ["pattern"],
        },
        "bash": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
        "ask_user": {
            "type": "object",
            "properties": {"question": {"type": "string"}},
            "required": ["question"],
        },
    }
    handlers: dict[str, Callable[..., Any]] = {
        "read": read,
        "write": write,
        "edit": edit,
        "glob": glob,
        "grep": grep,
        "bash": bash,
        "ask_user": ask_user_tool,
    }
    tools: list[Tool] = []
    for name in names:
        handler = handlers[name]
        tools.append(
            Tool(
                name=name,
                handler=handler,
                description=(handler.__doc__ or "").strip(),
                parameters=params[name],
                annotations=BUILTIN_TOOLS[name],
                is_async=asyncio.iscoroutinefunction(handler),
            )
        )
    return tools
