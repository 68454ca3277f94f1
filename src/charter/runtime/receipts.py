"""Typed receipts returned by run-producing and control operations."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class ReceiptStatus(StrEnum):
    COMPLETED = "completed"
    STARTED = "started"  # admitted and leased, still running (held runs, see docs)
    QUEUED = "queued"
    DEAD_LETTERED = "dead_lettered"
    BUDGET_EXHAUSTED = "budget_exhausted"
    DUPLICATE = "duplicate"
    LEASE_BUSY = "lease_busy"
    FAILED = "failed"


@dataclass(frozen=True)
class LeaseInfo:
    lease_id: str
    holder: str
    work_key: str
    acquired_at: str
    expires_at: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class RunReceipt:
    """The outcome of one unit of work (tick, trigger, spend, drained queue item)."""

    status: ReceiptStatus
    persona: str
    work_key: str | None
    at: str
    run_id: str | None = None
    lease: LeaseInfo | None = None
    error: str | None = None
    budget_receipt_id: str | None = None
    exhaustion_reason: str | None = None
    cost_usd: float = 0.0
    tokens: int = 0
    event_ids: tuple[int, ...] = ()
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status in (
            ReceiptStatus.COMPLETED,
            ReceiptStatus.STARTED,
            ReceiptStatus.QUEUED,
            ReceiptStatus.DUPLICATE,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "persona": self.persona,
            "run_id": self.run_id,
            "work_key": self.work_key,
            "lease": self.lease.to_dict() if self.lease else None,
            "error": self.error,
            "budget_receipt_id": self.budget_receipt_id,
            "exhaustion_reason": self.exhaustion_reason,
            "cost_usd": self.cost_usd,
            "tokens": self.tokens,
            "at": self.at,
            "event_ids": list(self.event_ids),
            "detail": self.detail,
        }


@dataclass(frozen=True)
class ControlReceipt:
    """The outcome of pause/resume/disable/enable."""

    persona: str
    action: str
    changed: bool
    lifecycle: str
    at: str
    message: str | None = None
    drained: tuple[RunReceipt, ...] = ()
    event_ids: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "persona": self.persona,
            "action": self.action,
            "changed": self.changed,
            "lifecycle": self.lifecycle,
            "message": self.message,
            "at": self.at,
            "drained": [r.to_dict() for r in self.drained],
            "event_ids": list(self.event_ids),
        }
