"""The rollout evidence of one persona: a projection of its receipts, kept flat in cost.

Like ``status``, the evidence is a snapshot (stored beside the status snapshots under the
key ``<persona>#rollout``) plus the tail of the log. It keeps counters per
``day | epoch | arm | tier`` bucket, so a report over any window sums a few hundred small
rows however long the log grows; the epoch advances at every promotion and demotion so
criteria are judged on the evidence gathered *at the current standing*.

Folded events: ``persona.run.recorded`` (arm, tier, denials, cost, approvals, the
proposal awaiting its outcome), ``persona.approval.*`` (time to approval),
``persona.rollout.agreement`` and ``persona.autonomy.promoted|demoted``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from charter.runtime import Event, EventLog, Snapshot, format_time, parse_time
from charter.runtime.log import LogTransaction

from .events import APPROVAL_RESOLUTIONS, RunKind
from .outcomes import predicted_outcome
from .tiers import SHADOW, SUGGEST

VERSION = 2
SUFFIX = "#rollout"
PENDING_CAP = 2000
RESOLVED_CAP = 5000
HISTORY_CAP = 100
COMPACT_AFTER = 256
_PAGE = 10_000

COUNTERS = (
    "runs",
    "completed",
    "failed",
    "budget_stops",
    "denials",
    "cost_usd",
    "proposals",
    "approvals_granted",
    "approvals_denied",
    "approvals_expired",
    "approval_wait_s",
    "approval_waits",
    "agreed",
    "disagreed",
    "agreed_cost_usd",
)


def bucket_key(day: str, epoch: int, arm: str, tier: str, cohort: str) -> str:
    return f"{day}|{epoch}|{arm}|{tier}|{cohort}"


def split_key(key: str) -> tuple[str, int, str, str, str]:
    day, epoch, arm, tier, cohort = key.split("|", 4)
    return day, int(epoch), arm, tier, cohort


@dataclass(frozen=True)
class Row:
    """One bucket inside a report window."""

    arm: str
    tier: str
    cohort: str
    counters: dict[str, float]


@dataclass
class Evidence:
    """The folded evidence (JSON-serialisable via :meth:`to_dict`)."""

    persona: str
    buckets: dict[str, dict[str, float]] = field(default_factory=dict)
    pending: dict[str, dict[str, Any]] = field(default_factory=dict)  # work_key -> proposal
    open_approvals: dict[str, str] = field(default_factory=dict)  # approval_id -> requested at
    run_approvals: dict[str, dict[str, float]] = field(default_factory=dict)
    resolved: dict[str, bool] = field(default_factory=dict)  # run_id -> agreed
    streak: int = 0
    epoch: int = 0
    standing: dict[str, Any] | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    last_run: dict[str, Any] | None = None
    last_event_id: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "buckets": self.buckets,
            "pending": self.pending,
            "open_approvals": self.open_approvals,
            "run_approvals": self.run_approvals,
            "resolved": self.resolved,
            "streak": self.streak,
            "epoch": self.epoch,
            "standing": self.standing,
            "history": self.history,
            "last_run": self.last_run,
            "last_event_id": self.last_event_id,
        }

    @classmethod
    def from_dict(cls, persona: str, data: Mapping[str, Any]) -> Evidence:
        return cls(
            persona,
            buckets=dict(data.get("buckets", {})),
            pending=dict(data.get("pending", {})),
            open_approvals=dict(data.get("open_approvals", {})),
            run_approvals=dict(data.get("run_approvals", {})),
            resolved=dict(data.get("resolved", {})),
            streak=int(data.get("streak", 0)),
            epoch=int(data.get("epoch", 0)),
            standing=data.get("standing"),
            history=list(data.get("history", [])),
            last_run=data.get("last_run"),
            last_event_id=int(data.get("last_event_id", 0)),
        )

    def bucket(self, day: str, epoch: int, arm: str, tier: str, cohort: str) -> dict[str, float]:
        key = bucket_key(day, epoch, arm, tier, cohort)
        if key not in self.buckets:
            self.buckets[key] = dict.fromkeys(COUNTERS, 0)
        return self.buckets[key]

    def apply(self, event: Event) -> None:
        """Fold one event of this persona."""
        self.last_event_id = max(self.last_event_id, event.event_id)
        kind = event.kind
        p = event.payload
        if kind == RunKind.RUN_RECORDED:
            self._run(event, p.get("record") or {})
        elif kind == RunKind.APPROVAL_REQUESTED:
            if p.get("approval_id"):
                self.open_approvals[str(p["approval_id"])] = format_time(event.occurred_at)
        elif kind in APPROVAL_RESOLUTIONS:
            requested = self.open_approvals.pop(str(p.get("approval_id")), None)
            if requested is not None and p.get("run_id"):
                acc = self.run_approvals.setdefault(
                    str(p["run_id"]), {"approval_wait_s": 0.0, "approval_waits": 0}
                )
                wait = (event.occurred_at - parse_time(requested)).total_seconds()
                acc["approval_wait_s"] += max(0.0, wait)
                acc["approval_waits"] += 1
        elif kind == AGREEMENT_RECORDED:
            self._agreement(p)
        elif kind in (AUTONOMY_PROMOTED, AUTONOMY_DEMOTED):
            self.standing = {
                "kind": "promoted" if kind == AUTONOMY_PROMOTED else "demoted",
                "tier": p.get("to"),
                "from": p.get("from"),
                "at": format_time(event.occurred_at),
                "event_id": event.event_id,
                "by": p.get("by"),
                "reason": p.get("reason"),
            }
            self.epoch += 1
            self.streak = 0
            self.history.append(dict(self.standing))
            del self.history[:-HISTORY_CAP]

    def _run(self, event: Event, record: Mapping[str, Any]) -> None:
        autonomy = record.get("autonomy") or {}
        tier = str(autonomy.get("effective") or "unknown")
        arm = str(autonomy.get("arm") or "outside")
        cohort = str((autonomy.get("rollout") or {}).get("cohort") or "")
        day = event.occurred_at.strftime("%Y-%m-%d")
        b = self.bucket(day, self.epoch, arm, tier, cohort)
        status = str(record.get("status") or "")
        b["runs"] += 1
        if status == "completed":
            b["completed"] += 1
        elif status == "budget_exhausted":
            b["budget_stops"] += 1
        else:
            b["failed"] += 1
        denials = len(record.get("denied") or ())
        cost = float((record.get("budget") or {}).get("run_usd") or 0.0)
        b["denials"] += denials
        b["cost_usd"] += cost
        b["proposals"] += len(record.get("dry_runs") or ()) + len(record.get("proposals") or ())
        for approval in record.get("approvals") or ():
            state = approval.get("status") if isinstance(approval, Mapping) else None
            if state in ("granted", "denied", "expired"):
                b[f"approvals_{state}"] += 1
        run_id = str(record.get("run_id") or event.payload.get("run_id") or "")
        waits = self.run_approvals.pop(run_id, None)
        if waits:
            b["approval_wait_s"] += waits["approval_wait_s"]
            b["approval_waits"] += waits["approval_waits"]
        self.last_run = {
            "run_id": run_id,
            "status": status,
            "denials": denials,
            "cost_usd": cost,
            "arm": arm,
            "tier": tier,
            "cohort": cohort,
            "at": format_time(event.occurred_at),
        }
        work_key = record.get("work_key")
        predicted = predicted_outcome(record)
        if tier in (SHADOW, SUGGEST) and predicted and work_key and status == "completed":
            self.pending.pop(str(work_key), None)  # the newest proposal for a key counts
            self.pending[str(work_key)] = {
                "run_id": run_id,
                "predicted": predicted,
                "day": day,
                "epoch": self.epoch,
                "arm": arm,
                "tier": tier,
                "cohort": cohort,
                "cost_usd": cost,
                "at": format_time(event.occurred_at),
            }
            while len(self.pending) > PENDING_CAP:
                del self.pending[next(iter(self.pending))]

    def _agreement(self, p: Mapping[str, Any]) -> None:
        agree = bool(p.get("agree"))
        b = self.bucket(
            str(p.get("run_day")),
            int(p.get("epoch", 0)),
            str(p.get("arm")),
            str(p.get("tier")),
            str(p.get("cohort") or ""),
        )
        if agree:
            b["agreed"] += 1
            b["agreed_cost_usd"] += float(p.get("cost_usd") or 0.0)
            self.streak = 0
        else:
            b["disagreed"] += 1
            self.streak += 1
        run_id = str(p.get("run_id"))
        key = str(p.get("work_key"))
        if self.pending.get(key, {}).get("run_id") == run_id:
            del self.pending[key]
        self.resolved[run_id] = agree
        while len(self.resolved) > RESOLVED_CAP:
            del self.resolved[next(iter(self.resolved))]

    def window(self, since: datetime, *, epoch: int | None = None) -> list[Row]:
        """The buckets on or after ``since`` (and of ``epoch`` when given)."""
        first = since.strftime("%Y-%m-%d")
        out = []
        for key, counters in self.buckets.items():
            day, ep, arm, tier, cohort = split_key(key)
            if day >= first and (epoch is None or ep == epoch):
                out.append(Row(arm, tier, cohort, counters))
        return out


AGREEMENT_RECORDED = RunKind.AGREEMENT_RECORDED
AUTONOMY_PROMOTED = RunKind.AUTONOMY_PROMOTED
AUTONOMY_DEMOTED = RunKind.AUTONOMY_DEMOTED


def load_txn(txn: LogTransaction, persona: str) -> tuple[Evidence, int]:
    """The evidence as of the transaction, and how many tail events were folded."""
    snapshot = txn.load_snapshot(persona + SUFFIX)
    if snapshot is not None and snapshot.version == VERSION:
        evidence = Evidence.from_dict(persona, snapshot.state)
    else:
        evidence = Evidence(persona)
    after, folded = evidence.last_event_id, 0
    while True:
        tail = txn.read(after=after, persona=persona, limit=_PAGE)
        for event in tail:
            evidence.apply(event)
        folded += len(tail)
        if len(tail) < _PAGE:
            return evidence, folded
        after = tail[-1].event_id


def save_txn(txn: LogTransaction, evidence: Evidence) -> None:
    txn.save_snapshot(
        Snapshot(evidence.persona + SUFFIX, evidence.last_event_id, VERSION, evidence.to_dict())
    )


def load(log: EventLog, persona: str, *, compact_after: int = COMPACT_AFTER) -> Evidence:
    """Read the evidence; a long tail is folded into a fresh snapshot (write lock)."""
    with log.read_view() as txn:
        evidence, folded = load_txn(txn, persona)
    if folded > compact_after:
        with log.write() as txn:
            evidence, _ = load_txn(txn, persona)
            save_txn(txn, evidence)
    return evidence


def rebuild(log: EventLog, persona: str) -> Evidence:
    """Full replay from event 0, ignoring the snapshot (for checks)."""
    evidence = Evidence(persona)
    for event in log.iter_all(persona=persona):
        evidence.apply(event)
    return evidence


__all__ = [
    "AGREEMENT_RECORDED",
    "AUTONOMY_DEMOTED",
    "AUTONOMY_PROMOTED",
    "Evidence",
    "Row",
    "load",
    "load_txn",
    "rebuild",
    "save_txn",
]
