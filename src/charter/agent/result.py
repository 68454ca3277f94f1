"""Typed agent-loop results whose ``to_dict()`` is seed 001's namespaced shape."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

STATUSES = (
    "done",
    "stuck",
    "budget_exhausted",
    "verify_capped",
    "provider_error",
    "failed",
    "incomplete",
    "idle",
    "watchdog",
    "suspended",
)


@dataclass
class LlmStats:
    iterations: int = 0
    duration_ms: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "iterations": self.iterations,
            "duration_ms": self.duration_ms,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }


@dataclass
class ToolStats:
    """Deduplicated tool names, in order of first occurrence."""

    calls: list[str] = field(default_factory=list)
    successful: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    mode: str = "native"

    @staticmethod
    def _add(names: list[str], name: str) -> None:
        if name not in names:
            names.append(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": list(self.calls),
            "successful": list(self.successful),
            "rejected": list(self.rejected),
            "mode": self.mode,
        }


@dataclass
class AgentResult:
    """The result of :func:`charter.agent.agent_loop`.

    ``extras`` holds the fields the seed makes conditional (``stop_reason``,
    ``adaptive_budget``, stall diagnostics, judge summaries); they appear in
    :meth:`to_dict` only when present.
    """

    status: str
    error: dict[str, Any] | None = None
    text: str = ""
    visible_text: str = ""
    llm: LlmStats = field(default_factory=LlmStats)
    tools: ToolStats = field(default_factory=ToolStats)
    deferred_user_messages: list[Any] = field(default_factory=list)
    task_ledger: dict[str, Any] = field(default_factory=dict)
    trace: dict[str, Any] = field(default_factory=dict)
    transcript: dict[str, Any] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)
    #: The validated answer when ``output_schema`` is a type (a model instance, a
    #: dataclass, ...) or a JSON Schema (the data); ``to_dict`` has its JSON as ``data``.
    output: Any = field(default=None, compare=False)

    @property
    def ok(self) -> bool:
        return self.status == "done"

    @property
    def stop_reason(self) -> str | None:
        reason = self.extras.get("stop_reason", self.trace.get("stop_reason"))
        return None if reason is None else str(reason)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "status": self.status,
            "error": self.error,
            "text": self.text,
            "visible_text": self.visible_text,
            "llm": self.llm.to_dict(),
            "tools": self.tools.to_dict(),
            "deferred_user_messages": list(self.deferred_user_messages),
            "task_ledger": self.task_ledger,
            "trace": self.trace,
            "transcript": self.transcript,
        }
        out.update(self.extras)
        return out


@dataclass
class TurnResult(AgentResult):
    """The result of :func:`charter.agent.agent_turn`: a loop result plus two summaries."""

    iterations: list[dict[str, Any]] = field(default_factory=list)
    judge_decisions: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["iterations"] = [dict(i) for i in self.iterations]
        out["judge_decisions"] = [dict(j) for j in self.judge_decisions]
        return out
