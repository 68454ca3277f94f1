"""Daemon loops: ``daemon=True`` idles instead of ending, and wakes on events (seed 001).

A daemon's turn that would end the loop makes it *idle*. Idle, it waits for a wake
source: a trigger event (``daemon_trigger``, from this process or another: the queue is a
JSONL file under ``persist_path``), a queued human message (``agent_session_queue_message``
on its ``session_id``), the ``wake_interval_ms`` timer, or a change to a ``watch_paths``
file. The wake becomes a user message and the loop goes on. With no wake source at all
it ends ``idle``; ``idle_watchdog_attempts`` consecutive idle ticks (one tick:
``IDLE_TICK_S``) without a wake end it ``watchdog``. The result carries ``daemon_state``
and ``daemon_snapshot_path``.

``persist_path`` (a directory) holds ``snapshot.json`` (the conversation, state and
counters, written atomically on every idle and at the end; ``consolidate_on_idle``
compacts first) and ``events.jsonl`` (the durable FIFO of triggers). A trigger is marked
consumed only after the turns it woke have finished, so a daemon stopped or killed
mid-trigger replays it on resume (``resume_path``). The handle API (``daemon_spawn``,
``daemon_trigger``, ``daemon_snapshot``, ``daemon_stop``, ``daemon_resume``) runs a
daemon loop on a background thread.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from charter.errors import CharterError

from .hooks import LoopHook
from .options import AgentOptionError

IDLE_TICK_S = 0.05
#: Running daemon hooks by queue directory (how a handle finds its loop's hook).
_ACTIVE: dict[str, Any] = {}
SNAPSHOT = "snapshot.json"
EVENTS = "events.jsonl"
DAEMON_OPTIONS = (
    "daemon",
    "persist_path",
    "resume_path",
    "wake_interval_ms",
    "watch_paths",
    "consolidate_on_idle",
    "idle_watchdog_attempts",
)


class DaemonQueueFull(CharterError, RuntimeError):
    """``daemon_trigger`` on a queue already holding ``event_queue_capacity`` events."""


# -- the durable trigger queue ----------------------------------------------------------


def _append(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    blob = "".join(json.dumps(r, default=str) + "\n" for r in records).encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, blob)
    finally:
        os.close(fd)


def pending_events(directory: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Triggers not yet consumed, oldest first."""
    path = Path(directory) / EVENTS
    pending: dict[str, dict[str, Any]] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    except FileNotFoundError:
        return []
    for line in lines:
        if not line.endswith("\n"):
            break  # a torn last line was never committed
        record = json.loads(line)
        if record.get("type") == "event":
            pending[str(record["id"])] = {"id": record["id"], "event": record["event"]}
        elif record.get("type") == "consumed":
            for item in record.get("ids", []):
                pending.pop(str(item), None)
    return list(pending.values())


QUEUE = "queue.json"


def _stored_capacity(directory: Path) -> int | None:
    """The ``event_queue_capacity`` ``daemon_spawn`` recorded next to the queue."""
    try:
        data = json.loads((directory / QUEUE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise AgentOptionError(
            "daemon_trigger", f"{directory / QUEUE}: unreadable ({exc})"
        ) from exc
    value = data.get("event_queue_capacity") if isinstance(data, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def trigger_path(
    directory: str | os.PathLike[str], event: Mapping[str, Any], capacity: int | None = None
) -> str:
    """Queue ``event`` for the daemon persisting to ``directory`` (any process).

    The queue's capacity is ``capacity`` or, when not given, the ``event_queue_capacity``
    its daemon was spawned with (recorded in ``queue.json``): a trigger from another
    process, which has only the path, is bounded like one through the handle. The count
    and the append happen under the queue's lock, so concurrent triggers cannot overfill
    it."""
    if not isinstance(event, Mapping):
        raise AgentOptionError("daemon_trigger", "an event is a dict, e.g. {kind, ...}")
    where = Path(directory)
    limit = capacity if capacity is not None else _stored_capacity(where)
    event_id = f"evt_{uuid.uuid4().hex[:12]}"
    record = {"type": "event", "id": event_id, "event": dict(event)}
    where.mkdir(parents=True, exist_ok=True)
    fd = os.open(where / EVENTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if limit is not None and len(pending_events(where)) >= limit:
            raise DaemonQueueFull(f"the daemon's event queue holds {limit} events (its capacity)")
        os.write(fd, (json.dumps(record, default=str) + "\n").encode())
    finally:
        os.close(fd)
    return event_id


# -- the loop hook -----------------------------------------------------------------------


def _positive(option: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise AgentOptionError(option, f"expected a positive integer, got {value!r}")
    return value


class DaemonHook(LoopHook):
    """Turns a finished turn into an idle wait; wakes the loop on the next event."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.persist = Path(options["persist_path"]) if options.get("persist_path") else None
        self.resume = Path(options["resume_path"]) if options.get("resume_path") else None
        self.interval = _positive("wake_interval_ms", options.get("wake_interval_ms"))
        watch = options.get("watch_paths") or []
        if isinstance(watch, str):
            watch = [watch]
        if not isinstance(watch, (list, tuple)) or not all(isinstance(w, str) for w in watch):
            raise AgentOptionError("watch_paths", "expected a path or a list of paths")
        self.watch = [Path(w) for w in watch]
        self.watchdog = _positive("idle_watchdog_attempts", options.get("idle_watchdog_attempts"))
        self.consolidate = bool(options.get("consolidate_on_idle", False))
        self.stop_flag = threading.Event()
        self.in_flight: list[str] = []
        self.state = "active"
        self.wakes = 0
        self.run: Any = None
        self._mtimes: dict[Path, float | None] = {}

    @property
    def queue_dir(self) -> Path | None:
        return self.persist or self.resume

    async def on_start(self, run: Any, stack: Any) -> None:
        self.run = run
        if self.queue_dir is not None:
            _ACTIVE[str(self.queue_dir)] = self
        if self.resume is not None:
            snap = load_daemon_snapshot(self.resume)
            run.messages = [*snap.get("messages", []), *run.messages]
            run.event("daemon_resumed", path=str(self.resume / SNAPSHOT))
        self._mtimes = {p: _mtime(p) for p in self.watch}

    def _wake_sources(self) -> bool:
        return bool(
            self.interval or self.watch or self.queue_dir or getattr(self.run, "session_hook", None)
        )

    async def on_idle(self, run: Any, iteration: int) -> dict[str, Any] | None:
        """Wait for a wake; ``{messages}`` to go on, ``{status, stop_reason}`` to end."""
        self._consume()
        self.state = "idle"
        if self.consolidate and run.compaction is not None:
            await run.compaction.compact("idle")
        self.save()
        run.event("daemon_idle", iteration=iteration)
        if not self._wake_sources():
            return {"status": "idle", "stop_reason": "no_wake_source"}
        ticks = 0
        deadline = None if self.interval is None else time.monotonic() + self.interval / 1000
        while True:
            if self.stop_flag.is_set():
                return {"status": "idle", "stop_reason": "daemon_stopped"}
            wake = self._poll(deadline)
            if wake is not None:
                self.state = "active"
                self.wakes += 1
                run.event("daemon_wake", iteration=iteration, reason=wake["reason"])
                return wake
            ticks += 1
            if self.watchdog is not None and ticks >= self.watchdog:
                return {"status": "watchdog", "stop_reason": "idle_watchdog"}
            await asyncio.sleep(IDLE_TICK_S)

    def _poll(self, deadline: float | None) -> dict[str, Any] | None:
        if self.queue_dir is not None:
            events = pending_events(self.queue_dir)
            fresh = [e for e in events if e["id"] not in self.in_flight]
            if fresh:
                self.in_flight.extend(e["id"] for e in fresh)
                body = "\n".join(json.dumps(e["event"], sort_keys=True) for e in fresh)
                return {"reason": "trigger", "messages": [f"[daemon wake: trigger]\n{body}"]}
        hook = getattr(self.run, "session_hook", None)
        if hook is not None:
            queued = hook.take_deferred()
            if queued:
                return {"reason": "user_message", "messages": [str(q["content"]) for q in queued]}
        for path in self.watch:
            now = _mtime(path)
            if now != self._mtimes.get(path):
                self._mtimes[path] = now
                return {"reason": "file_changed", "messages": [f"[daemon wake: {path} changed]"]}
        if deadline is not None and time.monotonic() >= deadline:
            return {"reason": "timer", "messages": ["[daemon wake: timer]"]}
        return None

    def _consume(self) -> None:
        """The turns a trigger woke are done: mark it consumed (never before)."""
        if self.in_flight and self.queue_dir is not None:
            _append(self.queue_dir / EVENTS, [{"type": "consumed", "ids": list(self.in_flight)}])
        self.in_flight = []

    def save(self) -> Path | None:
        if self.persist is None:
            return None
        run = self.run
        self.persist.mkdir(parents=True, exist_ok=True)
        target = self.persist / SNAPSHOT
        data = {
            "version": 1,
            "state": self.state,
            "session_id": run.cfg.session_id,
            "prompt": run.prompt,
            "system": run.system,
            "messages": run.messages,
            "iterations": run.stats.iterations,
            "wakes": self.wakes,
            "saved_at": time.time(),
        }
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, default=str), encoding="utf-8")
        os.replace(tmp, target)
        return target

    def on_finish(self, run: Any) -> None:
        _ACTIVE.pop(str(self.queue_dir), None)
        path = self.save()
        run.extras["daemon_state"] = run.final_status
        run.extras["daemon_snapshot_path"] = None if path is None else str(path)


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime_ns / 1e9
    except FileNotFoundError:
        return None


def load_daemon_snapshot(path: str | os.PathLike[str]) -> dict[str, Any]:
    target = Path(path)
    if target.is_dir():
        target = target / SNAPSHOT
    try:
        data = json.loads(target.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AgentOptionError("resume_path", f"{target}: no daemon snapshot") from None
    except ValueError as exc:
        raise AgentOptionError("resume_path", f"{target}: not a snapshot ({exc})") from None
    if not isinstance(data, dict) or data.get("version") != 1:
        raise AgentOptionError("resume_path", f"{target}: not a version-1 daemon snapshot")
    return data


def daemon_hook(options: Mapping[str, Any]) -> DaemonHook | None:
    if not options.get("daemon"):
        for key in DAEMON_OPTIONS[1:]:
            if options.get(key) not in (None, False):
                raise AgentOptionError(key, "is a daemon option: set daemon=True")
        return None
    return DaemonHook(options)


# -- the handle API ----------------------------------------------------------------------


class DaemonHandle:
    """A daemon loop running on a background thread."""

    def __init__(self, name: str, path: Path, capacity: int | None) -> None:
        self.name = name
        self.path = path
        self.capacity = capacity
        self.thread: threading.Thread | None = None
        self.result: Any = None
        self.error: BaseException | None = None
        self.hook: DaemonHook | None = None
        self.started = threading.Event()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "persist_path": str(self.path), "capacity": self.capacity}


def _run_daemon(
    handle: DaemonHandle, task: str, system: str | None, options: dict[str, Any]
) -> None:
    from .loop import agent_loop

    try:
        handle.result = agent_loop(task, system, **options)
    except BaseException as exc:  # reported by daemon_stop / daemon_snapshot
        handle.error = exc
    finally:
        handle.started.set()


def daemon_spawn(config: Mapping[str, Any]) -> DaemonHandle:
    """Start a daemon: ``{name, task, system, persist_path, event_queue_capacity, ...}``
    plus any agent_loop option (``daemon`` is implied)."""
    options = dict(config)
    name = str(options.pop("name", "daemon"))
    task = str(options.pop("task", ""))
    system = options.pop("system", None)
    capacity = _positive("event_queue_capacity", options.pop("event_queue_capacity", None))
    if not options.get("persist_path"):
        raise AgentOptionError(
            "persist_path", "daemon_spawn needs persist_path (its queue and snapshot)"
        )
    options["daemon"] = True
    handle = DaemonHandle(name, Path(options["persist_path"]), capacity)
    # recorded with the queue, so triggers by path (other processes) honour it too
    handle.path.mkdir(parents=True, exist_ok=True)
    queue = handle.path / QUEUE
    tmp = queue.with_suffix(".tmp")
    tmp.write_text(json.dumps({"event_queue_capacity": capacity}), encoding="utf-8")
    tmp.replace(queue)
    handle.thread = threading.Thread(
        target=_run_daemon, args=(handle, task, system, options), name=f"daemon-{name}", daemon=True
    )
    handle.thread.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not handle.started.is_set():
        handle.hook = _ACTIVE.get(str(handle.path))
        if handle.hook is not None:
            break
        time.sleep(0.005)
    if handle.error is not None:
        raise handle.error
    return handle


def daemon_trigger(handle: DaemonHandle | str | os.PathLike[str], event: Mapping[str, Any]) -> str:
    """Queue an event for a daemon (a handle, or its ``persist_path`` from another process)."""
    if isinstance(handle, DaemonHandle):
        return trigger_path(handle.path, event, handle.capacity)
    return trigger_path(handle, event)


def daemon_snapshot(handle: DaemonHandle) -> dict[str, Any]:
    """The daemon's state: ``{name, state, pending_event_count, iterations, snapshot_path}``."""
    hook = handle.hook
    state = "stopped" if handle.result is not None else (hook.state if hook else "starting")
    return {
        "name": handle.name,
        "state": state,
        "pending_event_count": len(pending_events(handle.path)),
        "iterations": hook.run.stats.iterations if hook and hook.run else 0,
        "snapshot_path": str(handle.path / SNAPSHOT),
        "error": None if handle.error is None else str(handle.error),
    }


def daemon_stop(handle: DaemonHandle, timeout: float = 30.0) -> Any:
    """Stop the daemon at its next idle point; returns its loop result. A trigger whose
    turns had not finished stays queued and is replayed by :func:`daemon_resume`."""
    if handle.hook is not None:
        handle.hook.stop_flag.set()
    if handle.thread is not None:
        handle.thread.join(timeout)
    if handle.error is not None:
        raise handle.error
    return handle.result


def daemon_resume(path: str | os.PathLike[str], **config: Any) -> DaemonHandle:
    """Start a daemon again from its ``persist_path``: conversation and queued events."""
    snap = load_daemon_snapshot(path)
    options = {
        "name": config.pop("name", Path(path).name),
        "task": config.pop("task", "Resume: handle the queued events."),
        "system": config.pop("system", snap.get("system")),
        "persist_path": str(path),
        "resume_path": str(path),
        **config,
    }
    return daemon_spawn(options)
