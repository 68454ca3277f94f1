"""The mutable state one run shares between its gate, its model router and its context."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .budget import BudgetStop, LiveBudget
from .parking import Journal, Replay
from .receipts import ReceiptLog


@dataclass
class HandoffIntent:
    """A handoff the workflow asked for; routed when the run ends (see ``RunContext.handoff``)."""

    kind: str
    payload: dict[str, Any]
    summary: str | None = None
    policy_override: dict[str, Any] | None = None
    facts: dict[str, bool] = field(default_factory=dict)


@dataclass
class RunControl:
    persona: str
    run_id: str
    tier: str
    receipts: ReceiptLog
    budget: LiveBudget
    calls: int = 0
    reads: int = 0  # read-only calls (kept in tool_calls for the timeline, ids read_N)
    tier_reason: str = ""  # why the run acts in ``tier`` (effective_tier's reason)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    dry_runs: list[dict[str, Any]] = field(default_factory=list)
    proposals: list[dict[str, Any]] = field(default_factory=list)
    denied: list[dict[str, Any]] = field(default_factory=list)
    approvals: list[dict[str, Any]] = field(default_factory=list)
    escalations: int = 0
    approval_denied: bool = False
    stop: BudgetStop | None = None
    fatal: str | None = None
    handoffs: list[HandoffIntent] = field(default_factory=list)
    # each ctx.agent() call's bounded transcript (charter.run.transcripts)
    transcripts: list[dict[str, Any]] = field(default_factory=list)
    # parking (charter.run.parking): park instead of blocking on an approval; what this
    # attempt did; and, when resuming a parked run, the journal being replayed
    park: bool = False
    journal: Journal = field(default_factory=Journal)
    replay: Replay | None = None
    # charter.run.leases.LeaseKeeper while the workflow runs: a lost lease stops the run
    lease: Any = None

    def next_call_id(self) -> str:
        self.calls += 1
        return f"call_{self.calls}"

    def confirm_lease(self) -> None:
        """Set ``fatal`` when the run's lease is gone (renewing it first when stale)."""
        if self.lease is None or self.fatal is not None:
            return
        from .leases import LeaseLost

        try:
            self.lease.check()
        except LeaseLost as exc:
            self.fatal = str(exc)

    @property
    def stopping(self) -> bool:
        """Whether no further call may run: a budget stop, a fatal error, a lost lease."""
        self.confirm_lease()
        return self.stop is not None or self.fatal is not None


__all__ = ["HandoffIntent", "RunControl"]
