"""Background workers: ``spawn_agent``, ``wait_agent``, ``send_input``, ``close_agent``,
``list_agents`` (seed 001 "Delegated workers").

A worker is a :func:`~charter.agent.subagents.run_request` child running as an asyncio
task. It is created in the spawner's context, so it keeps the spawner's policy stack
(its request pushed on top as a ``kind="sub_agent"`` frame) and a token budget reserved
from the spawner's ledger *at spawn time*: workers are narrower by construction, however
many run at once. ``send_input`` re-runs a finished worker with a new task under the same
frame, carrying its transcript as ``carry.transcript_mode`` says (``inherit`` | ``fork`` |
``reset``).

All functions are ``async`` and must run inside one event loop (workers are tasks of it).
:func:`agent_lifecycle_tools` offers them to a model as tools.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

from charter.policy import SideEffectLevel, ToolAnnotations, current_stack

from .options import AgentOptionError
from .subagents import (
    SubAgentRequest,
    child_policy,
    reserve,
    run_request,
    sub_agent_request,
    sub_agent_transcript,
)
from .tools import Tool, as_tools
from .worktrees import Worktree, create_worktree, parse_execution, remove_worktree

TRANSCRIPT_MODES = ("inherit", "fork", "reset", "compact")
_CONFIG_KEYS = (
    "task",
    "name",
    "system",
    "tools",
    "allowed_tools",
    "policy",
    "token_budget",
    "returns",
    "carry",
    "provider",
    "model",
    "options",
    "execution",
)
TERMINAL = (
    "done",
    "failed",
    "cancelled",
    "stuck",
    "budget_exhausted",
    "verify_capped",
    "provider_error",
    "incomplete",
)


@dataclass
class Worker:
    """One background worker and its history of cycles."""

    id: str
    name: str
    request: SubAgentRequest
    transcript_mode: str
    policy: dict[str, Any]
    status: str = "running"
    granted: int | None = None
    parent_id: str | None = None
    worktree: Worktree | None = None
    resume_when: dict[str, Any] | None = None
    cycles: list[dict[str, Any]] = field(default_factory=list)
    task: asyncio.Task[dict[str, Any]] | None = field(default=None, repr=False)
    created_at: float = field(default_factory=time.time)

    @property
    def result(self) -> dict[str, Any] | None:
        return self.cycles[-1] if self.cycles else None

    def handle(self) -> dict[str, Any]:
        """The summary ``spawn_agent`` / ``list_agents`` return."""
        last = self.result
        return {
            "id": self.id,
            "name": self.name,
            "mode": "sub_agent",
            "status": self.status,
            "task": self.request.task,
            "session_id": self.request.session_id,
            "cycle": len(self.cycles) + (1 if self.status == "running" else 0),
            "token_budget": self.granted,
            "policy": self.policy,
            "transcript_mode": self.transcript_mode,
            "parent_id": self.parent_id,
            "worktree": None if self.worktree is None else self.worktree.to_dict(),
            "summary": None if last is None else last.get("summary"),
            "created_at": self.created_at,
            "resume_when": self.resume_when,
        }


class WorkerPool:
    """The workers of one runtime (the module keeps a default one)."""

    def __init__(self) -> None:
        self.workers: dict[str, Worker] = {}
        #: Lifecycle events (``WorkerStopped``), in order.
        self.events: list[dict[str, Any]] = []

    def get(self, handle: Mapping[str, Any] | str) -> Worker:
        key = handle if isinstance(handle, str) else str(handle.get("id"))
        worker = self.workers.get(key)
        if worker is None:
            raise KeyError(f"unknown worker {key!r}; known: {', '.join(self.workers) or 'none'}")
        return worker


_POOL = WorkerPool()
#: The worker whose task is running in this context (``None`` outside workers).
_CURRENT: ContextVar[str | None] = ContextVar("charter_current_worker", default=None)
#: The session id of that worker's own loop.
_CURRENT_SESSION: ContextVar[str | None] = ContextVar("charter_worker_session", default=None)


def compacted(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``carry.transcript_mode: "compact"``: the completed cycle's transcript as one
    deterministic abbreviated summary (charter.agent.compaction's ``truncate``), so the
    next cycle inherits what happened without its full history (and no tool call is left
    without its result)."""
    from .compaction import truncate_summary

    if not messages:
        return []
    summary = truncate_summary([dict(m) for m in messages])
    return [{"role": "user", "content": f"[compacted transcript of your last cycle]\n{summary}"}]


def current_worker_id(session_id: str | None = None) -> str | None:
    """The id of the worker running in this context (``None`` outside workers); with
    ``session_id``, only when that is the worker's own loop (not a sub-agent it runs)."""
    if session_id is not None and _CURRENT_SESSION.get() != session_id:
        return None
    return _CURRENT.get()


def _parse(config: Mapping[str, Any]) -> tuple[SubAgentRequest, str]:
    if not isinstance(config, Mapping):
        raise AgentOptionError("spawn_agent", "expected a config dict")
    for key in config:
        if key not in _CONFIG_KEYS:
            raise AgentOptionError(
                f"spawn_agent.{key}", f"unknown field; expected one of {', '.join(_CONFIG_KEYS)}"
            )
    carry = config.get("carry") or {}
    if not isinstance(carry, Mapping) or set(carry) - {"transcript_mode"}:
        raise AgentOptionError("spawn_agent.carry", "expected {transcript_mode}")
    mode = carry.get("transcript_mode", "inherit")
    if mode not in TRANSCRIPT_MODES:
        raise AgentOptionError(
            "spawn_agent.carry.transcript_mode", f"expected one of {', '.join(TRANSCRIPT_MODES)}"
        )
    extra = config.get("options") or {}
    if not isinstance(extra, Mapping):
        raise AgentOptionError("spawn_agent.options", "expected a dict of agent_loop options")
    opts: dict[str, Any] = {k: v for k, v in extra.items() if k != "resume_when"}
    for key in (
        "name",
        "system",
        "tools",
        "allowed_tools",
        "policy",
        "token_budget",
        "returns",
        "provider",
        "model",
    ):
        if config.get(key) is not None:
            opts[key] = config[key]
    req = sub_agent_request(str(config.get("task") or ""), **opts)
    if req.name == "sub_agent":
        req = replace(req, name=f"worker-{uuid.uuid4().hex[:6]}")
    return req, str(mode)


def _start(
    worker: Worker,
    req: SubAgentRequest,
    messages: Sequence[Mapping[str, Any]],
    parent_transcript_id: str | None = None,
) -> None:
    reserved = reserve(req)  # held from the spawner's remainder now, not when it runs
    worker.granted = reserved[1].limit
    worker.request = req
    worker.status = "running"

    async def body() -> dict[str, Any]:
        _CURRENT.set(worker.id)  # this task's own context: workers it spawns are its children
        _CURRENT_SESSION.set(req.session_id)
        try:
            env = await run_request(req, reserved, messages)
        except asyncio.CancelledError:
            worker.status = "cancelled"
            raise
        except Exception as exc:  # a crashed worker is a result, not a lost task
            env = {
                "ok": False,
                "status": "failed",
                "error": {"category": "internal", "message": f"{type(exc).__name__}: {exc}"},
                "session_id": req.session_id,
            }
        if parent_transcript_id is not None and isinstance(env.get("transcript"), dict):
            env["transcript"]["parent_transcript_id"] = parent_transcript_id
        worker.cycles.append(env)
        worker.status = str(env["status"])
        if env["status"] == "suspended" and env.get("initiator") == "self":
            # the worker parked itself: the same snapshot suspend_agent writes, under the
            # worker's id, so resume_agent(handle, input) finds it (seed 001: the tool
            # "calls the same suspend path as suspend_agent")
            from .snapshots import write_snapshot

            target = write_snapshot(
                worker, str(env.get("reason") or ""), "self", env.get("conditions")
            )
            env["handle"] = {"id": worker.id, "snapshot_path": str(target), "mode": "sub_agent"}
        return env

    worker.task = asyncio.get_running_loop().create_task(body(), name=f"charter-{worker.id}")


def _resume_when(config: Mapping[str, Any]) -> dict[str, Any] | None:
    """``options.resume_when``: the ResumeConditions shape self-parking uses."""
    from .suspension import parse_resume_conditions

    extra = config.get("options") if isinstance(config, Mapping) else None
    if not isinstance(extra, Mapping) or extra.get("resume_when") is None:
        return None
    try:
        return parse_resume_conditions(extra["resume_when"])
    except AgentOptionError as exc:  # name the path inside the worker config
        raise AgentOptionError(
            f"spawn_agent.options.resume_when{exc.option.removeprefix('resume_conditions')}",
            str(exc).partition(f"'{exc.option}': ")[2],
        ) from None


async def spawn_agent(
    config: Mapping[str, Any], *, pool: WorkerPool | None = None
) -> dict[str, Any]:
    """Start a worker from ``{task, name?, system?, tools?, allowed_tools?, policy?,
    token_budget?, returns?, carry?, provider?, model?, options?, execution?}``; return
    its handle. ``options.resume_when`` (``{trigger?, timeout?, on_event?}``, validated
    by :func:`~charter.agent.suspension.parse_resume_conditions`) is kept on the worker
    and becomes the ``conditions`` of a snapshot that names none."""
    resume_when = _resume_when(config)
    execution = parse_execution(config.get("execution")) if isinstance(config, Mapping) else None
    if execution is None:
        req, mode = _parse(config)
        handle = await spawn_request(req, mode, pool=pool)
        if resume_when is not None:
            (pool or _POOL).workers[handle["id"]].resume_when = resume_when
            handle["resume_when"] = resume_when
        return handle
    worker_id = f"worker_{uuid.uuid4().hex[:12]}"
    tree = create_worktree(execution, worker_id)
    try:
        conf = {k: v for k, v in config.items() if k != "execution"}
        conf["options"] = {**(conf.get("options") or {}), "workspace": tree.path}
        if callable(conf.get("tools")):
            conf["tools"] = conf["tools"](tree.path)  # tools bound to the worktree
        req, mode = _parse(conf)
        await spawn_request(req, mode, pool=pool, worker_id=worker_id)
    except BaseException:
        remove_worktree(replace(tree, cleanup="remove"))
        raise
    worker = (pool or _POOL).workers[worker_id]
    worker.worktree = tree
    worker.resume_when = resume_when
    return worker.handle()


async def spawn_request(
    req: SubAgentRequest,
    transcript_mode: str = "inherit",
    *,
    pool: WorkerPool | None = None,
    worker_id: str | None = None,
    messages: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """Start a worker for a normalised request (``sub_agent_run(background=True)``)."""
    pool = pool or _POOL
    worker = Worker(
        id=worker_id or f"worker_{uuid.uuid4().hex[:12]}",
        name=req.name,
        request=req,
        transcript_mode=transcript_mode,
        policy=child_policy(current_stack(), req.frame_policy()).to_dict(),
        parent_id=_CURRENT.get(),
    )
    pool.workers[worker.id] = worker
    _start(worker, req, messages)
    return worker.handle()


async def wait_agent(
    handle: Mapping[str, Any] | str | Sequence[Mapping[str, Any] | str],
    *,
    timeout: float | None = None,
    pool: WorkerPool | None = None,
) -> Any:
    """Wait for one worker (its latest envelope + ``worker`` handle) or a list of them."""
    pool = pool or _POOL
    if isinstance(handle, (list, tuple)):
        return [await wait_agent(h, timeout=timeout, pool=pool) for h in handle]
    worker = pool.get(handle)  # type: ignore[arg-type]
    if worker.task is not None and not worker.task.done():
        try:
            await asyncio.wait_for(asyncio.shield(worker.task), timeout)
        except TimeoutError:
            return {"ok": False, "status": "running", "worker": worker.handle()}
        except asyncio.CancelledError:
            if worker.status != "cancelled":
                raise
    env = dict(worker.result or {"ok": False, "status": worker.status})
    env["worker"] = worker.handle()
    return env


async def send_input(
    handle: Mapping[str, Any] | str, task: str, *, pool: WorkerPool | None = None
) -> dict[str, Any]:
    """Re-run a finished worker with a new task, carrying its transcript per its mode."""
    pool = pool or _POOL
    worker = pool.get(handle)
    if worker.status == "running":
        raise AgentOptionError("send_input", f"worker {worker.id} is still running")
    if worker.status in ("cancelled", "stopped", "suspended"):
        raise AgentOptionError("send_input", f"worker {worker.id} is {worker.status}")
    if not isinstance(task, str) or not task.strip():
        raise AgentOptionError("send_input.task", "expected a non-empty string")
    messages: list[Mapping[str, Any]] = []
    last = worker.result
    parent_tid: str | None = None
    if worker.transcript_mode != "reset" and last and last.get("transcript"):
        full = sub_agent_transcript(last["transcript"]) or {}
        messages = list(full.get("messages", []))
        if worker.transcript_mode == "fork":
            parent_tid = str(last["transcript"]["id"])
        elif worker.transcript_mode == "compact":
            messages = list(compacted(messages))
    cycle = len(worker.cycles) + 1
    base = worker.request.session_id.split(".")[0]
    req = replace(worker.request, task=task, session_id=f"{base}.{cycle}")
    _start(worker, req, messages, parent_tid)
    return worker.handle()


async def close_agent(
    handle: Mapping[str, Any] | str, *, pool: WorkerPool | None = None
) -> dict[str, Any]:
    """Cancel a worker (its budget reservation is settled) and mark it terminal."""
    pool = pool or _POOL
    worker = pool.get(handle)
    if worker.task is not None and not worker.task.done():
        worker.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await worker.task
        worker.status = "cancelled"
    if worker.worktree is not None:
        remove_worktree(worker.worktree)
    return worker.handle()


def _handoff(worker: Worker) -> dict[str, Any]:
    """A parent-facing summary of what a worker did (for a takeover)."""
    last = worker.result or {}
    return {
        "worker": worker.id,
        "name": worker.name,
        "task": worker.request.task,
        "status": last.get("status", worker.status),
        "summary": last.get("summary"),
        "tools": last.get("tools"),
        "transcript": last.get("transcript"),
        "cycles": len(worker.cycles),
    }


async def agent_stop(
    handle: Mapping[str, Any] | str,
    *,
    graceful: bool = False,
    reason: str | None = None,
    pool: WorkerPool | None = None,
) -> dict[str, Any]:
    """Stop a worker and, recursively, the workers it spawned. ``graceful=True`` returns
    ``{status: "stopped", handoff, children, handoffs, worker}`` (the worker's handoff and
    its descendants' folded in); otherwise a hard cancel like :func:`close_agent`.
    Each stop is a ``WorkerStopped`` event in ``pool.events``."""
    pool = pool or _POOL
    worker = pool.get(handle)
    children = [w for w in pool.workers.values() if w.parent_id == worker.id]
    folded: list[dict[str, Any]] = []
    for child in children:
        out = await agent_stop(child.id, graceful=graceful, reason=reason, pool=pool)
        if graceful:
            folded.extend([out["handoff"], *out["handoffs"]])
    await close_agent(worker.id, pool=pool)
    worker.status = "stopped" if graceful else "cancelled"
    pool.events.append(
        {"type": "WorkerStopped", "worker": worker.id, "graceful": graceful, "reason": reason}
    )
    if not graceful:
        return worker.handle()
    return {
        "status": "stopped",
        "handoff": _handoff(worker),
        "children": [c.handle() for c in children],
        "handoffs": folded,
        "worker": worker.handle(),
    }


def list_agents(*, pool: WorkerPool | None = None) -> list[dict[str, Any]]:
    """Summaries of every known worker, oldest first."""
    return [w.handle() for w in (pool or _POOL).workers.values()]


def agent_lifecycle_tools(
    tools: Sequence[Tool | Callable[..., Any]] = (),
    *,
    pool: WorkerPool | None = None,
    subagents: bool = False,
    **defaults: Any,
) -> list[Tool]:
    """Model-facing ``spawn_agent`` / ``wait_agent`` / ``send_input`` / ``close_agent`` /
    ``list_agents`` tools; spawned workers may use ``tools`` under ``defaults``.
    ``subagents=True`` adds ``subagent_pause`` / ``subagent_resume`` / ``subagent_stop``."""
    base = as_tools(list(tools))
    own = pool or WorkerPool()

    async def spawn(
        task: str,
        name: str | None = None,
        allowed_tools: list[str] | None = None,
        token_budget: int | None = None,
    ) -> dict[str, Any]:
        config: dict[str, Any] = {"task": task, "tools": base, "options": dict(defaults)}
        for key, value in (
            ("name", name),
            ("allowed_tools", allowed_tools),
            ("token_budget", token_budget),
        ):
            if value is not None:
                config[key] = value
        try:
            return {"status": "ok", **_strip(await spawn_agent(config, pool=own))}
        except AgentOptionError as exc:
            return {"status": "error", "error": str(exc)}

    async def wait(id: str, timeout_s: float | None = None) -> dict[str, Any]:
        try:
            env = await wait_agent(id, timeout=timeout_s, pool=own)
        except KeyError as exc:
            return {"status": "error", "error": str(exc.args[0])}
        return {**env, "status": "ok", "worker_status": env["status"]}

    async def send(id: str, task: str) -> dict[str, Any]:
        try:
            return {"status": "ok", **_strip(await send_input(id, task, pool=own))}
        except (KeyError, AgentOptionError) as exc:
            return {"status": "error", "error": str(exc)}

    async def close(id: str) -> dict[str, Any]:
        try:
            return {"status": "ok", **_strip(await close_agent(id, pool=own))}
        except KeyError as exc:
            return {"status": "error", "error": str(exc.args[0])}

    def listing() -> dict[str, Any]:
        return {"status": "ok", "agents": [_strip(h) for h in list_agents(pool=own)]}

    async def pause(id: str, reason: str = "") -> dict[str, Any]:
        from .snapshots import suspend_agent

        try:
            out = await suspend_agent(id, reason, initiator="parent", pool=own)
        except (KeyError, AgentOptionError) as exc:
            return {"status": "error", "error": str(exc)}
        return {**out, "status": "ok", "worker_status": out["status"]}

    async def resume(
        id: str, input: str | None = None, continue_transcript: bool = True
    ) -> dict[str, Any]:
        from .snapshots import resume_agent

        try:
            handle = await resume_agent(
                {"id": id}, input, continue_transcript, tools=base, pool=own, **defaults
            )
        except (KeyError, AgentOptionError) as exc:
            return {"status": "error", "error": str(exc)}
        return {"status": "ok", **_strip(handle)}

    async def stop(id: str, graceful: bool = True, reason: str | None = None) -> dict[str, Any]:
        try:
            out = await agent_stop(id, graceful=graceful, reason=reason, pool=own)
        except KeyError as exc:
            return {"status": "error", "error": str(exc.args[0])}
        return {**out, "status": "ok", "worker_status": out["status"]}

    ann = ToolAnnotations(SideEffectLevel.NONE, "delegate")
    str_prop = {"type": "string"}
    specs: list[tuple[str, Callable[..., Any], str, dict[str, Any], list[str]]] = [
        (
            "spawn_agent",
            spawn,
            "Start a background worker on a task; returns its handle.",
            {
                "task": str_prop,
                "name": str_prop,
                "allowed_tools": {"type": "array", "items": str_prop},
                "token_budget": {"type": "integer"},
            },
            ["task"],
        ),
        (
            "wait_agent",
            wait,
            "Wait for a worker to finish and return its result.",
            {"id": str_prop, "timeout_s": {"type": "number"}},
            ["id"],
        ),
        (
            "send_input",
            send,
            "Give a finished worker a follow-up task.",
            {"id": str_prop, "task": str_prop},
            ["id", "task"],
        ),
        ("close_agent", close, "Cancel a worker.", {"id": str_prop}, ["id"]),
        ("list_agents", listing, "List the workers and their status.", {}, []),
    ]
    if subagents:
        specs += [
            (
                "subagent_pause",
                pause,
                "Suspend a worker (snapshot kept for resume).",
                {"id": str_prop, "reason": str_prop},
                ["id"],
            ),
            (
                "subagent_resume",
                resume,
                "Resume a suspended worker, optionally with input.",
                {"id": str_prop, "input": str_prop, "continue_transcript": {"type": "boolean"}},
                ["id"],
            ),
            (
                "subagent_stop",
                stop,
                "Stop a worker; graceful returns its handoff.",
                {"id": str_prop, "graceful": {"type": "boolean"}, "reason": str_prop},
                ["id"],
            ),
        ]
    out = []
    for name, handler, description, props, required in specs:
        params: dict[str, Any] = {"type": "object", "properties": props}
        if required:
            params["required"] = required
        out.append(
            Tool(
                name=name,
                handler=handler,
                description=description,
                parameters=params,
                annotations=ann,
                is_async=name != "list_agents",
            )
        )
    return out


def _strip(handle: Mapping[str, Any]) -> dict[str, Any]:
    """A handle as a tool result: its own ``status`` renamed ``worker_status``."""
    out = dict(handle)
    out["worker_status"] = out.pop("status", None)
    return out
