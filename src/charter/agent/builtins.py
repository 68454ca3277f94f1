"""Built-in tools: read, write, edit, glob, grep, bash, ask_user.

Each carries the annotations of :data:`charter.policy.BUILTIN_TOOLS`, so every path and
command argument is decided by the policy core before the handler runs; the loop also
pushes a ``workspace`` frame that confines path arguments to the workspace. Handlers
resolve relative paths against the workspace. The file tools run in the charter process,
outside any sandbox: they go through :mod:`charter.agent.hostfs`, which decides on the
resolved name, opens it without following links and checks what it opened (no race
between the decision and the open), refuses special files, writes atomically and stops
walks at a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wcmatch import glob as wglob

from charter.policy import BUILTIN_TOOLS, make_context
from charter.policy.paths import BadPathError
from charter.sandbox import run_command, shell_argv

from .hostfs import (
    Deadline,
    Entry,
    HostFileError,
    decide_path,
    read_bytes,
    walk_files,
    write_atomic,
)
from .tools import Tool

#: ``glob`` patterns: ``**`` spans directories, ``*`` matches dot files (as pathlib's did).
_GLOB_FLAGS = wglob.GLOBSTAR | wglob.DOTGLOB

_MAX_READ = 200_000
_MAX_MATCHES = 200
#: Bytes a ``read``/``edit`` loads at most, and ``grep`` per file: a bound on memory and time.
_MAX_FILE_BYTES = 64 << 20
_MAX_GREP_FILE_BYTES = 8 << 20


def _relative_pattern(pattern: str) -> None:
    parts = Path(pattern).parts
    if Path(pattern).is_absolute() or ".." in parts:
        raise ValueError("pattern must be relative to 'path' and may not contain '..'")


def _require(name: str, value: Any, kind: type | tuple[type, ...], what: str) -> None:
    """Validate an argument before anything is touched (bool is not an int here)."""
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"'{name}' must be {what}, got {type(value).__name__}")


def _compile_grep(pattern: str) -> Any:
    """A linear-time regular expression (RE2): no pattern can make ``grep`` backtrack for
    minutes; the syntax RE2 lacks (backreferences, lookaround) is a clear error."""
    import re2

    try:
        return re2.compile(pattern)
    except re2.error as exc:
        raise ValueError(f"invalid grep pattern {pattern!r} (RE2 syntax): {exc}") from None


async def _on_daemon_thread(fn: Callable[[str], Any], arg: str) -> Any:
    """``fn(arg)`` on a daemon thread of its own: a blocking answerer past its deadline is
    abandoned (the default executor's threads would hold the event loop's shutdown)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def work() -> None:
        value: Any = None
        error: BaseException | None = None
        try:
            value = fn(arg)
        except BaseException as exc:  # handed to the awaiting task
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop may be gone by then
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=work, name="charter-ask-user", daemon=True).start()
    return await future


def builtin_tools(
    workspace: str | None = None,
    *,
    ask_user: Callable[[str], Any] | None = None,
    bash_timeout_s: float = 120.0,
    tool_timeout_s: float = 30.0,
    clock: Callable[[], float] = time.monotonic,
    ask_user_timeout_s: float | None = None,
    names: tuple[str, ...] = ("read", "write", "edit", "glob", "grep", "bash", "ask_user"),
) -> list[Tool]:
    """The built-in tools bound to ``workspace`` (default: the working directory).

    ``bash`` stops at ``bash_timeout_s``; ``glob`` and ``grep`` at ``tool_timeout_s``
    (``read``/``write``/``edit`` are bounded by size and refuse special files, so they
    cannot block), measured on ``clock``; ``ask_user`` at ``ask_user_timeout_s`` when set
    (a person answers it: no deadline by default).
    """
    ws = os.path.realpath(workspace or os.getcwd())
    ctx = make_context(ws)

    def read(path: str, offset: int = 0, limit: int | None = None) -> str:
        """Read a UTF-8 text file (optionally a line range)."""
        _require("path", path, str, "a string")
        _require("offset", offset, int, "an integer")
        if limit is not None:
            _require("limit", limit, int, "an integer")
        target = decide_path(ctx, path, "read")
        data = read_bytes(target, _MAX_FILE_BYTES)
        lines = data.decode("utf-8", errors="replace").splitlines()
        chosen = lines[offset : offset + limit if limit else None]
        return "\n".join(chosen)[:_MAX_READ]

    def write(path: str, content: str) -> dict[str, Any]:
        """Create or overwrite a file with ``content``."""
        _require("path", path, str, "a string")
        _require("content", content, str, "a string")
        data = content.encode("utf-8")
        write_atomic(decide_path(ctx, path, "write"), data)
        return {"status": "ok", "path": path, "bytes": len(data)}

    def edit(path: str, old_string: str, new_string: str, replace_all: bool = False) -> Any:
        """Replace ``old_string`` by ``new_string`` in a file (exactly once unless replace_all)."""
        _require("path", path, str, "a string")
        _require("old_string", old_string, str, "a string")
        _require("new_string", new_string, str, "a string")
        _require("replace_all", replace_all, bool, "a boolean")
        if not old_string:
            return {"status": "error", "error": "old_string is empty"}
        target = decide_path(ctx, path, "edit")
        text = read_bytes(target, _MAX_FILE_BYTES).decode("utf-8")
        count = text.count(old_string)
        if count == 0:
            return {"status": "error", "error": "old_string not found"}
        if count > 1 and not replace_all:
            return {"status": "error", "error": f"old_string occurs {count} times; be specific"}
        text = text.replace(old_string, new_string, -1 if replace_all else 1)
        write_atomic(target, text.encode("utf-8"))
        return {"status": "ok", "path": path, "replacements": count if replace_all else 1}

    def _decided(entry: Entry) -> str | None:
        # Every file listed or searched is decided like a ``read`` of it, by its resolved
        # name and (a symlink) by its own name too.
        try:
            return decide_path(ctx, entry.path, "read", as_given=entry.is_link)
        except (HostFileError, BadPathError):
            return None

    def _refuse_denied_root(root: str, pattern: str) -> None:
        # A pattern whose literal prefix lies in a denied tree is refused outright.
        literal: list[str] = []
        for part in Path(pattern).parts:
            if any(ch in part for ch in "*?["):
                break
            literal.append(part)
        base = os.path.join(root, *literal) if literal else root
        try:
            decide_path(ctx, base, "read")
        except HostFileError:
            raise PermissionError(f"'{os.path.relpath(base, ws)}' lies in a denied tree") from None

    def glob(pattern: str, path: str = ".") -> list[str]:
        """Files under ``path`` matching a glob ``pattern`` (``**`` recurses)."""
        _require("pattern", pattern, str, "a string")
        _require("path", path, str, "a string")
        _relative_pattern(pattern)
        deadline = Deadline(tool_timeout_s, "glob", clock)
        root = decide_path(ctx, path, "glob")
        _refuse_denied_root(root, pattern)
        depth = None if "**" in pattern else len(Path(pattern).parts)
        matcher = wglob.compile(pattern, flags=_GLOB_FLAGS)  # once, not per entry
        out: list[str] = []
        for entry in walk_files(root, deadline, max_depth=depth):
            if not matcher.match(entry.rel):
                continue
            # Listing is reading: a name is returned only when reading that file is allowed.
            target = _decided(entry)
            if target is None:
                continue
            if entry.is_link and not os.path.isfile(target):
                continue
            out.append(os.path.relpath(entry.path, ws))
        return sorted(out)[:_MAX_MATCHES]

    def grep(pattern: str, path: str = ".", include: str | None = None) -> list[str]:
        """Lines matching a regular expression (RE2 syntax), as ``file:line:text``."""
        _require("pattern", pattern, str, "a string")
        _require("path", path, str, "a string")
        if include is not None:
            _require("include", include, str, "a string")
            _relative_pattern(include)
        regex = _compile_grep(pattern)
        deadline = Deadline(tool_timeout_s, "grep", clock)
        root = decide_path(ctx, path, "grep")
        _refuse_denied_root(root, "")
        single = not os.path.isdir(root)
        if single:  # the file named: what keeps it from being searched is the answer
            read_bytes(root, _MAX_GREP_FILE_BYTES)
            entries: Any = [Entry(root, os.path.basename(root), False)]
        else:
            entries = walk_files(root, deadline)
        out: list[str] = []
        for entry in entries:
            if include and not fnmatch.fnmatch(os.path.basename(entry.path), include):
                continue
            target = _decided(entry)
            if target is None:
                continue
            try:
                lines = read_bytes(target, _MAX_GREP_FILE_BYTES).decode("utf-8").splitlines()
            except (UnicodeDecodeError, OSError):
                continue  # binary, raced (refused) or vanished: never a second open by name
            shown = os.path.relpath(entry.path, ws)
            for number, line in enumerate(lines, 1):
                if number % 4096 == 0:
                    deadline.check()
                if regex.search(line):
                    out.append(f"{shown}:{number}:{line}")
                    if len(out) >= _MAX_MATCHES:
                        return out
            deadline.check()
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
        if ask_user_timeout_s is None:
            answer = ask_user(question)
            if asyncio.iscoroutine(answer):
                answer = await answer
            return answer

        async def answered() -> Any:
            pending = await _on_daemon_thread(ask_user, question)
            return await pending if asyncio.iscoroutine(pending) else pending

        try:
            return await asyncio.wait_for(answered(), ask_user_timeout_s)
        except TimeoutError:
            return {
                "status": "error",
                "error": f"no answer from the user within {ask_user_timeout_s:g} s",
            }

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
