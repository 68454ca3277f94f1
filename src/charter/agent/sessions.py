"""Sessions that survive the process: a JSONL file per ``session_id``.

``agent_loop(..., session_id="s")`` continues the conversation stored under ``s``, from
this process or any other. The store is append-only JSONL, one file per session
(``<dir>/<session_id>.jsonl``), written at every turn boundary so a crash loses at most
the turn in flight. Record types:

- ``message``: one prompt-visible message appended to the conversation;
- ``reset``: the whole prompt-visible list after a rewrite (compaction); loading starts
  from the last ``reset``;
- ``scratchpad``: the session's scratchpad (``pad``, ``version``, ``action``);
- ``deferred``: a queued human message (``id``, ``content``), and ``deferred_delivered``
  once a loop injected it at a turn boundary;
- ``skills``: the names of the skills active when a loop ended.

The directory is ``session_store`` (option), else ``$CHARTER_SESSION_DIR``, else
``$XDG_STATE_HOME/charter/sessions`` (``~/.local/state/charter/sessions``): outside the
workspace on purpose, so the agent's own file tools cannot rewrite its history.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from charter.errors import CharterError

from .hooks import LoopHook
from .options import AgentOptionError

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")
SCRATCHPAD_MAX_BYTES = 16 * 1024


class SessionError(CharterError, ValueError):
    """A session id, file or record that cannot be used (names the file and line)."""


@dataclass
class SessionState:
    """What a session holds, replayed from its file."""

    session_id: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    scratchpad: dict[str, Any] | None = None
    scratchpad_version: int = 0
    deferred: list[dict[str, Any]] = field(default_factory=list)  # not yet delivered
    skills: list[str] = field(default_factory=list)
    exists: bool = False
    closed: str | None = None  # the reason a chat closed the session


def default_session_dir() -> Path:
    env = os.environ.get("CHARTER_SESSION_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "charter" / "sessions"


class SessionStore:
    """JSONL session files under one directory (appends are ``flock``-ed: many writers)."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_session_dir()

    def path(self, session_id: str) -> Path:
        if not isinstance(session_id, str) or not _ID.match(session_id):
            raise SessionError(
                f"session id {session_id!r}: expected 1-128 characters of letters, digits "
                "and . _ : @ - (starting with a letter or digit)"
            )
        return self.directory / f"{session_id}.jsonl"

    def append(self, session_id: str, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        path = self.path(session_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        blob = "".join(json.dumps(r, default=str, ensure_ascii=False) + "\n" for r in records)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, blob.encode("utf-8"))
        finally:
            os.close(fd)  # closing releases the lock

    def records(self, session_id: str) -> Iterator[dict[str, Any]]:
        path = self.path(session_id)
        try:
            fh = path.open(encoding="utf-8")
        except FileNotFoundError:
            return
        with fh:
            for number, line in enumerate(fh, 1):
                if not line.endswith("\n"):
                    break  # a torn last line (crash mid-append) was never committed
                try:
                    record = json.loads(line)
                except ValueError as exc:
                    raise SessionError(f"{path}:{number}: not a JSON record ({exc})") from None
                if not isinstance(record, dict) or not isinstance(record.get("type"), str):
                    raise SessionError(f"{path}:{number}: expected an object with a type")
                yield record

    def load(self, session_id: str) -> SessionState:
        state = SessionState(session_id)
        pending: dict[str, dict[str, Any]] = {}
        for record in self.records(session_id):
            state.exists = True
            kind = record["type"]
            if kind == "message":
                state.messages.append(dict(record["message"]))
            elif kind == "reset":
                state.messages = [dict(m) for m in record["messages"]]
            elif kind == "scratchpad":
                state.scratchpad = record.get("pad")
                state.scratchpad_version = int(record.get("version", 0))
            elif kind == "deferred":
                pending[str(record["id"])] = {"id": record["id"], "content": record["content"]}
            elif kind == "deferred_delivered":
                for item in record.get("ids", []):
                    pending.pop(str(item), None)
            elif kind == "skills":
                state.skills = [str(s) for s in record.get("active", [])]
            elif kind == "closed":
                state.closed = str(record.get("reason"))
        state.deferred = list(pending.values())
        return state

    def pending_deferred(self, session_id: str) -> list[dict[str, Any]]:
        return self.load(session_id).deferred


#: In-process conversations for ``session_store=False`` (nothing is written).
_MEMORY: dict[str, SessionState] = {}


def open_store(spec: Any) -> SessionStore | None:
    """The store the ``session_store`` option names (``False``: in memory only)."""
    if spec is False:
        return None
    if spec is None or spec is True:
        return SessionStore()
    if isinstance(spec, SessionStore):
        return spec
    if isinstance(spec, (str, os.PathLike)):
        return SessionStore(spec)
    raise AgentOptionError("session_store", "expected a directory path, a SessionStore or False")


# -- the seed's session functions -------------------------------------------------------


def _store(store: SessionStore | str | None) -> SessionStore:
    return store if isinstance(store, SessionStore) else SessionStore(store)


def agent_session_messages(
    session_id: str, *, store: SessionStore | str | None = None
) -> list[dict[str, Any]]:
    """The prompt-visible messages a continued loop on ``session_id`` starts from."""
    return _store(store).load(session_id).messages


def agent_session_exists(session_id: str, *, store: SessionStore | str | None = None) -> bool:
    return _store(store).path(session_id).exists()


def agent_session_delete(session_id: str, *, store: SessionStore | str | None = None) -> bool:
    """Remove a session's file; ``False`` when there was none."""
    try:
        _store(store).path(session_id).unlink()
        return True
    except FileNotFoundError:
        return False


def agent_session_queue_message(
    session_id: str, content: str, *, store: SessionStore | str | None = None
) -> str:
    """Queue a human message; the loop running (or next run) on the session injects it at
    the next turn boundary. Returns the message id."""
    if not isinstance(content, str) or not content:
        raise SessionError("a deferred user message needs non-empty text content")
    message_id = f"msg_{uuid.uuid4().hex[:12]}"
    _store(store).append(session_id, [{"type": "deferred", "id": message_id, "content": content}])
    return message_id


def _check_pad(pad: Any) -> dict[str, Any]:
    if not isinstance(pad, Mapping):
        raise SessionError(f"a scratchpad is a dict, got {type(pad).__name__}")
    size = len(json.dumps(pad, default=str).encode("utf-8"))
    if size > SCRATCHPAD_MAX_BYTES:
        raise SessionError(f"scratchpad is {size} bytes; the cap is {SCRATCHPAD_MAX_BYTES}")
    return dict(pad)


def agent_session_scratchpad(
    session_id: str, *, store: SessionStore | str | None = None
) -> dict[str, Any] | None:
    """The session's scratchpad (``None`` when it has none)."""
    return _store(store).load(session_id).scratchpad


def agent_session_set_scratchpad(
    session_id: str,
    pad: Mapping[str, Any],
    *,
    store: SessionStore | str | None = None,
    action: str = "set",
) -> int:
    """Replace the scratchpad (capped at 16 KiB); returns the new version."""
    target = _store(store)
    checked = _check_pad(pad)
    version = target.load(session_id).scratchpad_version + 1
    target.append(
        session_id,
        [{"type": "scratchpad", "pad": checked, "version": version, "action": action}],
    )
    return version


def agent_session_clear_scratchpad(
    session_id: str, *, store: SessionStore | str | None = None
) -> int:
    """Drop the scratchpad; returns the new version."""
    target = _store(store)
    version = target.load(session_id).scratchpad_version + 1
    target.append(
        session_id, [{"type": "scratchpad", "pad": None, "version": version, "action": "clear"}]
    )
    return version


def agent_session_seed_from_jsonl(
    path: str | os.PathLike[str],
    *,
    session_id: str | None = None,
    provider: str | None = None,
    model: str | None = None,
    validate: bool = True,
    truncate_to_last: int | None = None,
    drop_tool_calls: bool = False,
    store: SessionStore | str | None = None,
) -> str:
    """Create a session from an ``llm_transcript.jsonl`` sidecar (``llm_transcript_dir``).

    Imports the exact prompt-visible ``message`` events (a ``request`` snapshot replaces
    what came before it). ``provider`` / ``model`` check the sidecar's responses.
    ``truncate_to_last`` keeps the last N messages, ``drop_tool_calls`` removes tool calls
    and tool results. A sidecar with only ``response`` events lacks the user and tool turns:
    it is refused unless ``validate=False``. Returns the new session id.
    """
    source = Path(path)
    if source.is_dir():
        source = source / "llm_transcript.jsonl"
    messages: list[dict[str, Any]] = []
    sessions: set[str] = set()
    responses: list[dict[str, Any]] = []
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise SessionError(f"{source}: {exc.strerror or exc}") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise SessionError(f"{source}:{number}: not a JSON record ({exc})") from None
        kind = record.get("type") if isinstance(record, dict) else None
        if kind == "message":
            sessions.add(str(record.get("session_id")))
            index = int(record.get("index", len(messages)))
            del messages[index:]
            messages.append(dict(record["message"]))
        elif kind == "request":
            sessions.add(str(record.get("session_id")))
            messages = [dict(m) for m in record.get("messages") or []]
        elif kind == "response":
            responses.append(record)
        else:
            raise SessionError(f"{source}:{number}: unknown record type {kind!r}")
    if len(sessions) > 1:
        raise SessionError(
            f"{source}: holds {len(sessions)} sessions; seed from one sidecar per loop"
        )
    if not messages:
        if validate or not responses:
            raise SessionError(
                f"{source}: no prompt-visible messages (a provider-response-only sidecar lacks "
                "the user and tool turns; pass validate=False to import the responses)"
            )
        messages = [{"role": "assistant", "content": str(r.get("text") or "")} for r in responses]
    for key, want in (("provider", provider), ("model", model)):
        if want is None:
            continue
        seen = {str(r.get(key)) for r in responses if r.get(key) is not None}
        if seen and seen != {want}:
            raise SessionError(
                f"{source}: recorded {key} {', '.join(sorted(seen))}, expected {want}"
            )
    if drop_tool_calls:
        messages = [
            {k: v for k, v in m.items() if k != "tool_calls"}
            for m in messages
            if m.get("role") != "tool"
        ]
    if truncate_to_last is not None:
        messages = messages[-truncate_to_last:] if truncate_to_last > 0 else []
        while messages and messages[0].get("role") == "tool":
            messages.pop(0)  # never start on a tool result whose call was cut off
    new_id = session_id or f"session_{uuid.uuid4().hex[:12]}"
    target = _store(store)
    if target.path(new_id).exists():
        raise SessionError(f"session {new_id!r} already exists in {target.directory}")
    target.append(new_id, [{"type": "reset", "messages": messages, "source": str(source)}])
    return new_id


# -- the loop's view ----------------------------------------------------------------------


class SessionHook(LoopHook):
    """Loads the session before iteration 1, writes each turn's messages at the next turn
    boundary, injects queued human messages there, and records the active skills."""

    def __init__(self, store: SessionStore | None, session_id: str) -> None:
        self.store = store
        self.session_id = session_id
        self.written = 0
        self.rewrites = 0
        self.offset = 0
        self.state = SessionState(session_id)
        self.run: Any = None

    async def on_start(self, run: Any, stack: Any) -> None:
        self.run = run
        if self.store is None:
            self.state = _MEMORY.get(self.session_id) or SessionState(self.session_id)
        else:
            try:
                self.state = self.store.load(self.session_id)
            except SessionError as exc:
                raise AgentOptionError("session_id", str(exc)) from None
            path = self.store.path(self.session_id)
            self.offset = path.stat().st_size if path.exists() else 0
        run.session = self.state
        run.session_store = self.store
        run.session_hook = self
        run.messages = [*(dict(m) for m in self.state.messages), *run.messages]
        self.written = len(self.state.messages)
        # messages queued before this loop started are delivered with its first turn
        self._deliver(self.state.deferred, iteration=0)

    def _deliver(self, items: list[dict[str, Any]], iteration: int) -> None:
        if not items:
            return
        for item in items:
            self.run.messages.append({"role": "user", "content": str(item["content"])})
            self.run.event(
                "deferred_user_message_injected",
                session_id=self.session_id,
                iteration=iteration,
                id=item["id"],
            )
        if self.store is not None:
            self.store.append(
                self.session_id, [{"type": "deferred_delivered", "ids": [i["id"] for i in items]}]
            )

    def _tail_deferred(self) -> list[dict[str, Any]]:
        """Deferred messages appended by anyone since we last looked (reads new bytes only)."""
        if self.store is None:
            return []
        path = self.store.path(self.session_id)
        try:
            with path.open("rb") as fh:
                fh.seek(self.offset)
                blob = fh.read()
        except FileNotFoundError:
            return []
        end = blob.rfind(b"\n") + 1
        self.offset += end
        found: dict[str, dict[str, Any]] = {}
        for line in blob[:end].splitlines():
            record = json.loads(line)
            if record.get("type") == "deferred":
                found[str(record["id"])] = {"id": record["id"], "content": record["content"]}
            elif record.get("type") == "deferred_delivered":
                for item in record.get("ids", []):
                    found.pop(str(item), None)
        return list(found.values())

    def take_deferred(self) -> list[dict[str, Any]]:
        """Queued human messages not yet delivered, marked delivered (a daemon's wake)."""
        items = self._tail_deferred()
        if items and self.store is not None:
            self.store.append(
                self.session_id, [{"type": "deferred_delivered", "ids": [i["id"] for i in items]}]
            )
        return items

    def persist(self) -> None:
        messages = self.run.messages
        rewrites = getattr(self.run, "rewrites", 0)
        if self.store is None:
            self.state.messages = [dict(m) for m in messages]
            _MEMORY[self.session_id] = self.state
            return
        if rewrites != self.rewrites:  # compaction replaced earlier messages
            self.rewrites = rewrites
            records: list[dict[str, Any]] = [{"type": "reset", "messages": messages}]
        else:
            records = [{"type": "message", "message": m} for m in messages[self.written :]]
        self.written = len(messages)
        self.store.append(self.session_id, records)

    async def before_model_call(self, run: Any, iteration: int) -> None:
        self.persist()
        self._deliver(self._tail_deferred(), iteration)

    def on_finish(self, run: Any) -> None:
        self.persist()
        pending = self._tail_deferred()
        run.deferred_user_messages = [dict(p) for p in pending]
        names = [getattr(s, "name", str(s)) for s in getattr(run, "active_skills", [])]
        if names != self.state.skills:
            self.state.skills = names
            if self.store is not None:
                self.store.append(self.session_id, [{"type": "skills", "active": names}])
