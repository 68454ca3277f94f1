"""Which hooks a loop gets: the one place option values become :class:`LoopHook` s."""

from __future__ import annotations

import contextlib
from typing import Any

from .approvals import approvals_hook
from .audit import AuditSinkHook
from .compaction import compaction_hook
from .daemon import daemon_hook
from .delegation import skill_tool
from .hooks import LoopHook
from .narrowing import narrowing_hook, progress_hook
from .options import AgentOptionError
from .reminders import reminders_hook
from .scratchpad import scratchpad_hook
from .sessions import SessionHook, open_store
from .skills import skills_hook
from .streaming import stream_hook
from .suspension import SuspensionHook
from .tools import Tool
from .toolsets import check_unique
from .tracing import trace_hook
from .turn_review import review_hooks


async def install_extensions(run: Any, tools: list[Tool], stack: contextlib.AsyncExitStack) -> None:
    """Add the hooks (and their tools) the options ask for, then start them."""
    options = run.cfg.options
    tracing = trace_hook()
    if tracing is not None:  # first: every later hook's spans are the run's children
        run.hooks.add(tracing)
    if run.cfg.continue_session:  # first: later hooks read run.session on start
        run.hooks.add(SessionHook(open_store(options.get("session_store")), run.cfg.session_id))
    elif options.get("session_store") is not None:
        raise AgentOptionError("session_store", "needs session_id (which session to keep)")
    run.hooks.add(reminders_hook(options.get("system_reminders")))
    daemon = daemon_hook(options)
    if daemon is not None:
        run.hooks.add(daemon)
    compaction = compaction_hook(options, run.cfg.model, run.provider)
    if compaction is not None:  # before the scratchpad: it recites after compaction
        run.hooks.add(compaction)
        run.compaction = compaction
    scratchpad = scratchpad_hook(options.get("scratchpad"))
    if scratchpad is not None:
        run.hooks.add(scratchpad)
    approvals = approvals_hook(options)
    if approvals is not None:
        run.hooks.add(approvals)
    skills = skills_hook(options)
    if skills is not None:
        run.hooks.add(skills)
        tools.append(skill_tool(skills.registry, skills))
    progress = progress_hook(options.get("progress_tool"))
    if progress is not None:
        run.hooks.add(progress)
        tools.append(progress.tool())
    lifecycle = [k for k in ("subagents", "subagent_tools") if options.get(k) is not None]
    for key in lifecycle:
        if not isinstance(options[key], bool):
            raise AgentOptionError(key, f"expected true or false, got {options[key]!r}")
    if any(options[k] for k in lifecycle):
        from .workers import agent_lifecycle_tools

        # workers the model spawns get this loop's own tools, provider and model; the
        # parent may pause, resume (with input) and stop them
        defaults = {"provider": run.provider}
        if run.cfg.model is not None:
            defaults["model"] = run.cfg.model
        tools.extend(agent_lifecycle_tools(run.cfg.tools, subagents=True, **defaults))
    run.hooks.add(SuspensionHook())
    for hook in review_hooks(options, run.cfg.done_judge):
        run.hooks.add(hook)
    narrowing = narrowing_hook(options.get("tool_surface_narrowing"))
    if narrowing is not None:
        run.hooks.add(narrowing)
    streaming = stream_hook()  # last: it reports only calls no earlier hook held back
    extra = options.get("hooks") or ()
    if not isinstance(extra, (list, tuple)) or not all(isinstance(h, LoopHook) for h in extra):
        raise AgentOptionError("hooks", "expected a list of charter.agent.LoopHook instances")
    for hook in extra:
        run.hooks.add(hook)
    if options.get("prefetch_next_turn") and not any(
        isinstance(h, AuditSinkHook) for h in run.hooks.hooks
    ):
        raise AgentOptionError(
            "prefetch_next_turn", "needs an audit sink to flush (hooks=[AuditSinkHook(...)])"
        )
    if streaming is not None:
        run.hooks.add(streaming)
        run.stream = streaming
    check_unique(tools, run.cfg.tools)  # before any hook starts: a clash is a set-up error
    run.all_tools = tools
    await run.hooks.on_start(run, stack)
