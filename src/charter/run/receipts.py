"""Writing a run's receipts to the event log under the persona's ``receipt_policy``.

- ``required``: every receipt is written before the run proceeds; a failed write raises
  :class:`ReceiptError` and the run fails closed (the side effect does not happen).
- ``optional``: a failed write becomes a warning and the run goes on.
- ``disabled``: no receipts are written (mechanism events such as approvals still are).

Fencing: a run acts only while it holds its lease. Every receipt or mechanism event that
precedes an action (``persona.tool.executing``, a dry run, a proposal, a budget
reservation, an approval request, ...) checks, in the transaction that writes it, that
the run still holds a live lease; if the lease expired or was recovered by another
process or host (``persona.lease.expired``), :class:`LeaseLost` is raised whatever the
policy and the action does not happen. With ``disabled`` the check is made without a
write. What records an action that already happened (:data:`AFTER_THE_FACT`) is written
regardless: the log keeps the truth about a side effect even when the lease went meanwhile.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime
from typing import Any

from charter.runtime import Batch, EventLogError, PersonaRuntime, format_time, parse_time

from .errors import LeaseLost, ReceiptError
from .events import RunKind

REQUIRED = "required"
OPTIONAL = "optional"
DISABLED = "disabled"

#: Kinds that record what already happened (a side effect, a model's usage, the run's
#: own account): not fenced by the lease.
AFTER_THE_FACT = frozenset(
    {
        RunKind.TOOL_EXECUTED,
        RunKind.USAGE_RECORDED,
        RunKind.RUN_RECORDED,
        RunKind.RUN_TRANSCRIPT,
        RunKind.RUN_JOURNALED,
    }
)


class ReceiptLog:
    """Appends one run's receipts and mechanism events; keeps what it wrote."""

    def __init__(
        self,
        runtime: PersonaRuntime,
        persona: str,
        run_id: str,
        policy: str,
        clock: Callable[[], datetime],
    ) -> None:
        if policy not in (REQUIRED, OPTIONAL, DISABLED):
            raise ValueError(f"unknown receipt policy {policy!r}")
        self.runtime = runtime
        self.persona = persona
        self.run_id = run_id
        self.policy = policy
        self.clock = clock
        self.receipts: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self.event_ids: list[int] = []
        self.pending_ids: list[int] = []

    def receipt(self, kind: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        """Write a receipt (a ``receipt_id`` is assigned); ``None`` when not written.

        Raises :class:`LeaseLost` (whatever the policy) when ``kind`` precedes an action
        and the run no longer holds its lease."""
        if self.policy == DISABLED:
            if kind not in AFTER_THE_FACT:
                self.runtime.transact(self.clock(), self._fence)
            return None
        try:
            entry = self._append(kind, payload, receipt=True)
        except (EventLogError, sqlite3.Error, OSError) as exc:
            message = f"could not write receipt {kind}: {exc}"
            if self.policy == REQUIRED:
                raise ReceiptError(message) from exc
            self.warnings.append(message)
            return None
        self.receipts.append(entry)
        return entry

    def journal(self, kind: str, payload: dict[str, Any], entry: dict[str, Any]) -> None:
        """An after-the-fact receipt that also carries ``entry``, the run's journal of it
        (a tool's result, a model's response): what a retry of this run replays instead
        of executing or paying for again. With receipts disabled the entry is written
        alone (``persona.run.journaled``), so a retry never repeats a side effect."""
        if self.policy == DISABLED:
            try:
                self.mechanism(RunKind.RUN_JOURNALED, {**entry, "of": kind})
            except ReceiptError as exc:  # (the retry then finds the call undecided)
                self.warnings.append(str(exc))
            return
        self.receipt(kind, {**payload, "journal": entry})

    def mechanism(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Write an event the run depends on (approvals, the run record); failures raise."""
        try:
            return self._append(kind, payload, receipt=False)
        except (EventLogError, sqlite3.Error, OSError) as exc:
            raise ReceiptError(f"could not write {kind}: {exc}") from exc

    def emit(self, batch: Batch, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        """A mechanism event inside ``batch``, another write's transaction (the run's
        record goes with its finish). Its id is kept once that transaction commits."""
        entry = self._emit(batch, kind, payload, receipt=False)
        self.pending_ids.append(int(entry["event_id"]))
        return entry

    def committed(self) -> None:
        """The transaction :meth:`emit` wrote into has committed."""
        self.event_ids.extend(self.pending_ids)
        self.pending_ids.clear()

    def _fence(self, batch: Batch) -> None:
        """Raise :class:`LeaseLost` unless the run holds a lease live at ``batch.at``
        (read under the log's write lock: no other process can recover it meanwhile)."""
        state = batch.state(self.persona)
        run = state.runs.get(self.run_id)
        lease = state.leases.get(run.get("lease_id") or "") if run else None
        if lease is None or parse_time(lease["expires_at"]) <= batch.at:
            raise LeaseLost(
                f"run {self.run_id} no longer holds its lease (expired, or recovered by "
                "another process or host): it does not act"
            )

    def _emit(
        self, batch: Batch, kind: str, payload: dict[str, Any], *, receipt: bool
    ) -> dict[str, Any]:
        if kind not in AFTER_THE_FACT:
            self._fence(batch)
        full: dict[str, Any] = {"run_id": self.run_id, **payload}
        if receipt:
            full["receipt_id"] = batch.new_id("receipt")
        event = batch.emit(self.persona, kind, full)
        return {"kind": kind, "event_id": event.event_id, "at": format_time(batch.at), **full}

    def _append(self, kind: str, payload: dict[str, Any], *, receipt: bool) -> dict[str, Any]:
        entry = self.runtime.transact(
            self.clock(), lambda batch: self._emit(batch, kind, payload, receipt=receipt)
        )
        self.event_ids.append(int(entry["event_id"]))
        return entry


__all__ = ["AFTER_THE_FACT", "DISABLED", "OPTIONAL", "REQUIRED", "ReceiptLog"]
