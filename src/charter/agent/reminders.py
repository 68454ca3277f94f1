"""System reminders and how far they travel into sub-agents (seed 001).

A reminder is a short instruction the loop shows the model as a ``<system_reminder>``
message: given up front (``system_reminders=[text | {text, propagate}]``) or added
while the loop runs (:func:`agent_system_reminder`, e.g. from a tool or a hook; it is
shown at the next turn boundary). ``propagate`` says which sub-agents inherit it:
``"all"`` (every descendant), ``"session"`` (the default: direct children only) or
``"none"`` (this loop only). A child started inside the loop (``sub_agent_run``,
``spawn_agent``, ``delegate``) gets the pending reminders before its first turn, marked
``source: "inherited"`` with the ``originating_agent_id``. Every reminder shown is a
``system_reminder`` transcript event.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from typing import Any

from .hooks import LoopHook
from .options import AgentOptionError

PROPAGATE = ("all", "session", "none")
_CURRENT: contextvars.ContextVar[ReminderHook | None] = contextvars.ContextVar(
    "charter_agent_reminders", default=None
)


def _parse(entry: Any, where: str) -> dict[str, Any]:
    if isinstance(entry, str):
        entry = {"text": entry}
    if not isinstance(entry, Mapping) or not isinstance(entry.get("text"), str):
        raise AgentOptionError(where, "expected a string or {text, propagate}")
    unknown = set(entry) - {"text", "propagate"}
    if unknown:
        raise AgentOptionError(where, f"unknown key(s) {', '.join(sorted(unknown))}")
    propagate = entry.get("propagate", "session")
    if propagate not in PROPAGATE:
        raise AgentOptionError(f"{where}.propagate", f"expected one of {', '.join(PROPAGATE)}")
    return {"text": entry["text"], "propagate": propagate}


class ReminderHook(LoopHook):
    """Holds one loop's reminders and hands the inheritable ones to its children."""

    def __init__(self, own: list[dict[str, Any]]) -> None:
        self.own = own
        self.shown: list[dict[str, Any]] = []  # every reminder this loop has shown
        self.pending: list[dict[str, Any]] = []
        self.run: Any = None

    async def on_start(self, run: Any, stack: Any) -> None:
        self.run = run
        parent = _CURRENT.get()
        inherited = parent.for_child() if parent is not None else []
        token = _CURRENT.set(self)
        stack.callback(_CURRENT.reset, token)
        agent_id = run.cfg.session_id
        for item in inherited:
            self._show(item)
        for item in self.own:
            self._show({**item, "source": "own", "originating_agent_id": agent_id, "hops": 0})

    def add(self, text: str, propagate: str) -> None:
        item = _parse({"text": text, "propagate": propagate}, "agent_system_reminder")
        self.pending.append(
            {**item, "source": "own", "originating_agent_id": self.run.cfg.session_id, "hops": 0}
        )

    def _show(self, item: dict[str, Any]) -> None:
        self.shown.append(item)
        self.run.messages.append(
            {"role": "user", "content": f"<system_reminder>\n{item['text']}\n</system_reminder>"}
        )
        self.run.event(
            "system_reminder",
            text=item["text"],
            propagate=item["propagate"],
            source=item["source"],
            originating_agent_id=item["originating_agent_id"],
        )

    def before_model_call(self, run: Any, iteration: int) -> None:  # type: ignore[override]
        # a plain method (see charter.agent.hooks): this runs on every turn
        while self.pending:
            self._show(self.pending.pop(0))

    def for_child(self) -> list[dict[str, Any]]:
        """What a sub-agent started now inherits (pending ones included)."""
        out = []
        for item in [*self.shown, *self.pending]:
            hops = int(item.get("hops", 0))
            if item["propagate"] == "all" or (item["propagate"] == "session" and hops == 0):
                out.append({**item, "source": "inherited", "hops": hops + 1})
        return out


def agent_system_reminder(text: str, propagate: str = "session") -> None:
    """Add a reminder to the loop running in this context (shown at its next turn)."""
    hook = _CURRENT.get()
    if hook is None:
        raise AgentOptionError("agent_system_reminder", "no agent_loop is running here")
    hook.add(text, propagate)


def reminders_hook(spec: Any) -> ReminderHook:
    """Always installed (children must see what a parent's helper adds); ``spec`` is the
    ``system_reminders`` option."""
    if spec is None:
        return ReminderHook([])
    if isinstance(spec, (str, Mapping)):
        spec = [spec]
    if not isinstance(spec, (list, tuple)):
        raise AgentOptionError("system_reminders", "expected a list of reminders")
    return ReminderHook([_parse(e, f"system_reminders[{i}]") for i, e in enumerate(spec)])
