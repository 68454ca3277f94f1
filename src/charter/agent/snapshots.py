"""``suspend_agent`` / ``resume_agent``: a worker parked in a JSON snapshot and resumed,
in this process or another one.

The snapshot holds what the worker needs to go on (task, system prompt, the last
completed transcript, its JSON-able loop options) and, for enforcement, the worker's
*whole* policy as one frame: :func:`~charter.agent.subagents.child_policy` of the stack
it was spawned under and its request, plus the budget it was granted. A resumed worker
runs under that frame on top of whatever stack the resumer has, so resuming can narrow a
worker further but never widen it, even in a process where the spawner's frames do not
exist. Tools are code and do not travel: the resumer passes them again (and the snapshot's
frame still decides every call).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from charter.policy import Policy

from . import telemetry
from .options import AgentOptionError
from .subagents import _jsonable, sub_agent_request, sub_agent_transcript
from .tools import Tool
from .workers import _POOL, Worker, WorkerPool, spawn_request

SNAPSHOT_VERSION = 1
INITIATORS = ("self", "parent", "operator", "triggered")


def default_dir() -> Path:
    """``.charter/workers`` under the current directory (seed: ``.harn/workers``)."""
    return Path(os.getcwd()) / ".charter" / "workers"


async def suspend_agent(
    handle: Mapping[str, Any] | str,
    reason: str = "",
    *,
    initiator: str = "parent",
    path: str | os.PathLike[str] | None = None,
    pool: WorkerPool | None = None,
) -> dict[str, Any]:
    """Stop a worker at its last completed cycle, persist a snapshot, and return
    ``{status: "suspended", handle, reason, initiator, conditions, iterations_completed,
    snapshot_path}``. A cycle still running is cancelled and will run again on resume."""
    if initiator not in INITIATORS:
        raise AgentOptionError("initiator", f"expected one of {', '.join(INITIATORS)}")
    pool = pool or _POOL
    worker = pool.get(handle)
    if worker.status == "cancelled":
        raise AgentOptionError("suspend_agent", f"worker {worker.id} was closed")
    interrupted = worker.task is not None and not worker.task.done()
    if interrupted and worker.task is not None:
        worker.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await worker.task
    target = write_snapshot(worker, reason, initiator, None, interrupted=interrupted, path=path)
    last = worker.result
    return {
        "status": "suspended",
        "handle": worker.handle(),
        "reason": reason,
        "initiator": initiator,
        "conditions": worker.resume_when,
        "iterations_completed": int(((last or {}).get("llm") or {}).get("iterations", 0)),
        "snapshot_path": str(target),
    }


def write_snapshot(
    worker: Worker,
    reason: str,
    initiator: str,
    conditions: Mapping[str, Any] | None,
    *,
    interrupted: bool = False,
    path: str | os.PathLike[str] | None = None,
) -> Path:
    """Persist ``worker`` at its last completed cycle (``worker.status`` becomes
    ``suspended``); the file :func:`resume_agent` reads. Used by :func:`suspend_agent`
    (a parent or an operator parks the worker) and by a worker that parked itself."""
    last = worker.result
    messages: list[Any] = []
    if last and last.get("transcript"):
        full = sub_agent_transcript(last["transcript"]) or {}
        messages = [m for m in full.get("messages", []) if _jsonable(m)]
        if worker.transcript_mode == "compact":  # compacted before it is persisted
            from .workers import compacted

            messages = compacted(messages)
    req = worker.request
    snapshot = {
        "version": SNAPSHOT_VERSION,
        "id": worker.id,
        "name": worker.name,
        "status": "suspended",
        "reason": reason,
        "initiator": initiator,
        "conditions": dict(conditions) if conditions is not None else worker.resume_when,
        "task": req.task,
        "pending_task": req.task if interrupted else None,
        "system": req.system,
        "policy": worker.policy,
        "token_budget": worker.granted,
        "returns": req.returns,
        "transcript_mode": worker.transcript_mode,
        "session_id": req.session_id,
        "summary": None if last is None else last.get("summary"),
        "messages": messages,
        "options": {k: v for k, v in req.options.items() if _jsonable(v)},
        "cycles": len(worker.cycles),
        "suspended_at": time.time(),
        # the run's trace, continued by whoever resumes it (any process)
        "trace_context": telemetry.inject(),
    }
    target = Path(path) if path is not None else default_dir() / f"{worker.id}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(snapshot, indent=2))
    tmp.replace(target)
    worker.status = "suspended"
    return target


def load_snapshot(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check a worker snapshot; errors name the file and the field."""
    where = str(path)
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise AgentOptionError("resume_agent", f"{where}: cannot read ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        raise AgentOptionError("resume_agent", f"{where}: not JSON ({exc.msg})") from exc
    if not isinstance(data, dict) or data.get("version") != SNAPSHOT_VERSION:
        raise AgentOptionError("resume_agent", f"{where}: version: expected {SNAPSHOT_VERSION}")
    for key, kind in (("id", str), ("task", str), ("policy", dict), ("messages", list)):
        if not isinstance(data.get(key), kind):
            raise AgentOptionError("resume_agent", f"{where}: {key}: expected a {kind.__name__}")
    return data


async def resume_agent(
    worker_or_snapshot: Mapping[str, Any] | str | os.PathLike[str],
    resume_input: str | None = None,
    continue_transcript: bool = True,
    *,
    tools: Sequence[Tool | Callable[..., Any]] = (),
    pool: WorkerPool | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Resume a suspended worker from its handle (this process) or its snapshot path
    (any process). ``resume_input`` is the next task (default: the interrupted task, or
    "Continue."); ``continue_transcript=False`` starts from the prior summary only.
    ``tools`` and ``options`` (``provider``, ...) complete what the snapshot cannot carry."""
    pool = pool or _POOL
    if isinstance(worker_or_snapshot, Mapping) and "snapshot_path" in worker_or_snapshot:
        source: Any = worker_or_snapshot["snapshot_path"]
    elif isinstance(worker_or_snapshot, Mapping):
        worker = pool.get(worker_or_snapshot)
        source = default_dir() / f"{worker.id}.json"
    else:
        source = worker_or_snapshot
    snap = load_snapshot(source)
    if continue_transcript:
        messages: list[Any] = list(snap["messages"])
    elif snap.get("summary"):
        messages = [{"role": "user", "content": f"Summary of your earlier work: {snap['summary']}"}]
    else:
        messages = []
    task = resume_input or snap.get("pending_task") or "Continue."
    reminder = f"[system_reminder] Resumed after suspension ({snap['initiator']})"
    if snap.get("reason"):
        reminder += f": {snap['reason']}"
    opts = {**snap.get("options", {}), **options}
    req = sub_agent_request(
        f"{reminder}\n\n{task}",
        system=snap.get("system"),
        tools=list(tools),
        policy=Policy.from_dict(snap["policy"], source=f"{source}: policy"),
        token_budget=snap.get("token_budget"),
        returns=snap.get("returns"),
        name=snap.get("name"),
        session_id=f"{str(snap.get('session_id') or snap['id']).split('.')[0]}.r",
        **opts,
    )
    with telemetry.attached(snap.get("trace_context")):  # the worker task copies it
        return await spawn_request(
            req,
            str(snap.get("transcript_mode") or "inherit"),
            pool=pool,
            worker_id=str(snap["id"]),
            messages=messages,
        )
