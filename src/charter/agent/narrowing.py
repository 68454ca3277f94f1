"""``tool_surface_narrowing`` and ``progress_tool``: two small loop hooks.

Narrowing hides, it does not enforce: a pruned tool is no longer *offered* to the model,
but a call to it is still decided by the policy stack like any other (seed 001's
"hiding is not enforcing"; the design notes' point 8). Safe mode (the default) prunes
only tools classified ``read_only`` that went unused for ``window_turns`` turns;
mutating, approval, session-control, progress and result-polling tools, and tools with no
annotation (``unknown``), are kept.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from charter.policy import SideEffectLevel, ToolAnnotations

from .hooks import LoopHook
from .options import AgentOptionError
from .tools import Tool

CLASSES = (
    "read_only",
    "mutating",
    "approval",
    "session_control",
    "progress",
    "result_polling",
    "unknown",
)
_SESSION_CONTROL = {
    "skill",
    "spawn_agent",
    "send_input",
    "close_agent",
    "sub_agent_run",
    "subagent_pause",
    "subagent_resume",
    "subagent_stop",
    "delegate",
    "task",
    "ask_user",
    "wait_for_user",
    "agent_await_resumption",
}
_POLLING = {"wait_agent", "list_agents"}


def classify(tool: Tool) -> str:
    """The narrowing class of a tool, from its name and annotations."""
    name = tool.name.lower()
    if name in _POLLING:
        return "result_polling"
    if name in _SESSION_CONTROL:
        return "session_control"
    if tool.annotations.kind == "progress" or name == "agent_progress":
        return "progress"
    if tool.annotations.kind == "approval":
        return "approval"
    level = tool.annotations.side_effect_level
    if level is None:
        return "unknown"
    if level <= SideEffectLevel.READ_ONLY:
        return "read_only"
    return "mutating"


class NarrowingHook(LoopHook):
    """Hides tools unused across the last ``window_turns`` turns (by class)."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.window = int(spec.get("window_turns", 5))
        self.mode = str(spec.get("mode", "safe"))
        self.hard_keep = {str(n).lower() for n in spec.get("hard_keep", ())}
        default_prune = CLASSES if self.mode == "aggressive" else ("read_only",)
        self.prune = set(spec.get("prune_classes", default_prune)) - set(
            spec.get("keep_classes", ())
        )
        self.unknown_policy = str(spec.get("unknown_tool_policy", "keep"))
        if self.unknown_policy == "keep":
            self.prune.discard("unknown")
        elif "unknown" not in self.prune:
            self.prune.add("unknown")
        self.removed: list[str] = []
        self.removed_keys: set[str] = set()  # the hidden candidates' lower-case names
        # the surface stays as it is through this iteration (see before_model_call)
        self.until = self.window

    async def on_start(self, run: Any, stack: contextlib.AsyncExitStack) -> None:
        self.tools: list[Tool] = list(run.all_tools)
        run.hidden_tools = set()
        # tools and their classes are fixed for the run: classify once, not every turn
        self.classified = [(tool.name, classify(tool), tool.name.lower()) for tool in self.tools]
        self.candidates = [
            (shown, name)
            for shown, cls, name in self.classified
            if cls in self.prune and name not in self.hard_keep
        ]

    def before_model_call(self, run: Any, iteration: int) -> None:  # type: ignore[override]
        # a plain method (see charter.agent.hooks): this runs on every turn
        if iteration <= self.window or (iteration <= self.until and not self.removed_keys):
            # Nothing is hidden, and no kept candidate's last use can fall to the floor
            # before then: the surface stays (while something is hidden, every turn looks:
            # a call to a hidden tool brings it back)
            return
        # the last iteration each tool was called in, kept as its outcomes are recorded
        # (the tool_call_audit events' names and iterations): nothing to read here
        last_used = run.last_used
        floor = iteration - 1 - self.window  # used after ``floor``: recent, so kept
        # The candidates unused since ``floor`` are hidden. Until a kept one's last use
        # falls to the floor, or a hidden one is used, the same names come out: the turns
        # in between skip this (``until``).
        names: list[str] = []
        until = _NEVER
        for shown, name in self.candidates:
            used = last_used.get(name, 0)
            if used <= floor:
                names.append(shown)
            elif used + self.window < until:
                until = used + self.window
        self.until = until
        if names == self.removed:
            return  # the surface is unchanged: no event, nothing to build
        recent = {name for name, used in last_used.items() if used > floor}
        prune, keep = self.prune, self.hard_keep
        removed: list[dict[str, str]] = []
        kept: list[dict[str, str]] = []
        for shown, cls, name in self.classified:
            prunable = cls in prune and name not in keep and name not in recent
            (removed if prunable else kept).append({"name": shown, "class": cls})
        self.removed = names
        self.removed_keys = {name for _, name in self.candidates if last_used.get(name, 0) <= floor}
        run.hidden_tools = {n.lower() for n in names}
        run.event(
            "skill_narrow",
            iteration=iteration,
            removed_tools=names,
            remaining_tools=[k["name"] for k in kept],
            reason=f"unused for {self.window} turns",
            policy={
                "mode": self.mode,
                "window_turns": self.window,
                "prune_classes": sorted(self.prune),
                "hard_keep": sorted(self.hard_keep),
                "unknown_tool_policy": self.unknown_policy,
            },
            removed_details=removed,
            kept_details=kept,
        )


_NEVER = 1 << 62


def narrowing_hook(value: Any) -> NarrowingHook | None:
    """The hook for ``tool_surface_narrowing`` (seed default: on, window 5, safe)."""
    if value is None or value is True:
        spec: dict[str, Any] = {}
    elif value is False:
        return None
    elif isinstance(value, Mapping):
        spec = dict(value)
    else:
        raise AgentOptionError("tool_surface_narrowing", "expected true, false or a dict")
    known = {
        "enabled",
        "window_turns",
        "mode",
        "hard_keep",
        "prune_classes",
        "keep_classes",
        "unknown_tool_policy",
    }
    for key in spec:
        if key not in known:
            raise AgentOptionError(
                f"tool_surface_narrowing.{key}",
                f"unknown field; expected {', '.join(sorted(known))}",
            )
    if not spec.get("enabled", True):
        return None
    window = spec.get("window_turns", 5)
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise AgentOptionError("tool_surface_narrowing.window_turns", "expected a positive integer")
    if spec.get("mode", "safe") not in ("safe", "aggressive"):
        raise AgentOptionError("tool_surface_narrowing.mode", "expected safe or aggressive")
    for key in ("prune_classes", "keep_classes"):
        bad = [c for c in spec.get(key, ()) if c not in CLASSES]
        if bad:
            raise AgentOptionError(
                f"tool_surface_narrowing.{key}",
                f"unknown class {bad[0]!r}; expected {', '.join(CLASSES)}",
            )
    if spec.get("unknown_tool_policy", "keep") not in ("keep", "prune"):
        raise AgentOptionError(
            "tool_surface_narrowing.unknown_tool_policy", "expected keep or prune"
        )
    return NarrowingHook(spec)


class ProgressHook(LoopHook):
    """``progress_tool``: an ``agent_progress`` tool whose reports are events."""

    NUDGE = (
        "Report progress with the {name} tool when you finish a step: a short message and, "
        "if useful, the task list with each task's status."
    )

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.name = str(spec.get("name", "agent_progress"))
        self.description = str(
            spec.get("description", "Report progress: a message and optionally a task list.")
        )
        nudge = spec.get("system_prompt_nudge", True)
        self.nudge = self.NUDGE.format(name=self.name) if nudge is True else (nudge or None)
        self.run: Any = None
        self.reports: list[dict[str, Any]] = []

    def tool(self) -> Tool:
        def report(message: str = "", tasks: list[dict[str, Any]] | None = None) -> dict[str, Any]:
            entry = {"message": message, "tasks": list(tasks or [])}
            self.reports.append(entry)
            if self.run is not None:
                iteration = len(self.run.turns)
                self.run.event("progress_reported", iteration=iteration, **entry)
            return {"status": "ok", "recorded": len(self.reports)}

        return Tool(
            name=self.name,
            handler=report,
            description=self.description,
            parameters={
                "type": "object",
                "properties": {
                    "message": {"type": "string"},
                    "tasks": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "title": {"type": "string"},
                                "status": {
                                    "type": "string",
                                    "enum": ["pending", "in_progress", "completed"],
                                },
                            },
                        },
                    },
                },
            },
            annotations=ToolAnnotations(SideEffectLevel.NONE, "progress"),
        )

    async def on_start(self, run: Any, stack: contextlib.AsyncExitStack) -> None:
        self.run = run
        if self.nudge:
            run.system = f"{run.system}\n\n{self.nudge}" if run.system else self.nudge

    def on_finish(self, run: Any) -> None:
        run.extras["progress_reports"] = list(self.reports)


def progress_hook(value: Any) -> ProgressHook | None:
    if value is None or value is False:
        return None
    if value is True:
        return ProgressHook({})
    if not isinstance(value, Mapping):
        raise AgentOptionError("progress_tool", "expected true, false or a dict")
    for key in value:
        if key not in ("name", "description", "system_prompt_nudge"):
            raise AgentOptionError(
                f"progress_tool.{key}",
                "unknown field; expected name, description, system_prompt_nudge",
            )
    return ProgressHook(value)
