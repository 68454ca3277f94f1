"""Parked runs: a run that waits for an approval gives its lease back and resumes by replay.

``charter serve`` runs workflows with ``park_approvals``: when a call needs a human's
approval that has not been given, the approval request is recorded and the run *parks*:
``persona.run.parked`` stores what resuming needs (the trigger envelope, the pending
call, the journal of what already happened, the spend so far) and the lease is released,
so the run holds no worker and no concurrency slot, on any host, across restarts.

When the approval is decided (``charter approve``/``deny`` from any process, or the
console), any ``serve`` takes the run up again under a new lease and runs the workflow
from the top in *replay*: side-effecting calls the journal holds return their recorded
result without executing again (and without new receipts), model calls return their
recorded responses (without being charged again), and the pending call gets the human's
decision. A workflow that does something else on replay than it did the first time
(another tool at the same call id) fails closed instead of executing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from charter.errors import CharterError


class RunParked(BaseException):
    """Raised through the workflow when a call waits for an approval (not an Exception:
    a workflow's ``except Exception`` must not swallow it)."""

    def __init__(self, approval_id: str, call_id: str, tool: str) -> None:
        super().__init__(f"waiting for approval {approval_id} ({tool})")
        self.approval_id = approval_id
        self.call_id = call_id
        self.tool = tool


class ReplayDiverged(CharterError, RuntimeError):
    """The workflow did something else on replay than the journal recorded."""


@dataclass
class Journal:
    """What a run did before it parked: side-effecting calls and model responses."""

    tools: dict[str, dict[str, Any]] = field(default_factory=dict)  # call_id -> tool, result
    models: list[dict[str, Any]] = field(default_factory=list)  # LlmResponse.to_dict()
    run_usd: float = 0.0
    run_tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "tools": self.tools,
            "models": self.models,
            "run_usd": self.run_usd,
            "run_tokens": self.run_tokens,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Journal:
        return cls(
            dict(data.get("tools") or {}),
            list(data.get("models") or []),
            float(data.get("run_usd") or 0.0),
            int(data.get("run_tokens") or 0),
        )


@dataclass
class Replay:
    """The journal being replayed: tool results by call id, model responses in order."""

    journal: Journal
    next_model: int = 0

    def tool(self, call_id: str, name: str) -> dict[str, Any] | None:
        entry = self.journal.tools.get(call_id)
        if entry is None:
            return None
        if entry.get("tool") != name:
            raise ReplayDiverged(
                f"replay diverged at {call_id}: the journal has {entry.get('tool')!r}, the "
                f"workflow now calls {name!r}; nothing was executed"
            )
        return entry

    def model(self) -> dict[str, Any] | None:
        if self.next_model >= len(self.journal.models):
            return None
        response = self.journal.models[self.next_model]
        self.next_model += 1
        return response


#: the events a run's journal is rebuilt from (after a crash: see :func:`journal_of`)
JOURNAL_KINDS = (
    "persona.tool.executing",
    "persona.tool.executed",
    "persona.usage.recorded",
    "persona.run.journaled",
)

#: what a retry answers for a call its earlier attempt began and never reported
UNDECIDED = (
    "an earlier attempt of this run began this call and died before it reported; whether "
    "it took effect is unknown, so it is not executed again"
)


def journal_of(events: Iterable[Any], run_ids: Sequence[str]) -> Journal:
    """The journal of runs ``run_ids`` (earlier attempts of one piece of work, oldest
    first) from their events: each side-effecting call's result and each model's
    response, as they were recorded when they happened (a retry after a crash replays
    them: nothing executed again, nothing charged again). A call that was executing
    when its process died, with no result recorded, is answered with an error instead
    of being executed a second time (fail closed: it may have taken effect)."""
    wanted = set(run_ids)
    journal = Journal()
    executing: dict[str, str] = {}
    for event in events:
        payload = event.payload
        if payload.get("run_id") not in wanted:
            continue
        if event.kind == "persona.tool.executing":
            executing[str(payload.get("call_id"))] = str(payload.get("tool"))
            continue
        entry = payload.get("journal") if event.kind != "persona.run.journaled" else payload
        if not isinstance(entry, dict):
            continue
        if entry.get("call_id") is not None and "tool" in entry:
            call_id = str(entry["call_id"])
            executing.pop(call_id, None)
            journal.tools[call_id] = {"tool": entry["tool"], "result": entry.get("result")}
        elif isinstance(entry.get("model"), dict):
            journal.models.append(entry["model"])
            journal.run_usd = float(entry.get("run_usd") or journal.run_usd)
            journal.run_tokens = int(entry.get("run_tokens") or journal.run_tokens)
    for call_id, tool in executing.items():
        journal.tools[call_id] = {"tool": tool, "result": {"status": "error", "error": UNDECIDED}}
    return journal


__all__ = ["JOURNAL_KINDS", "Journal", "Replay", "ReplayDiverged", "RunParked", "journal_of"]
