"""Writing a run's receipts to the event log under the persona's ``receipt_policy``.

- ``required``: every receipt is written before the run proceeds; a failed write raises
  :class:`ReceiptError` and the run fails closed (the side effect does not happen).
- ``optional``: a failed write becomes a warning and the run goes on.
- ``disabled``: no receipts are written (mechanism events such as approvals still are).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime
from typing import Any

from charter.runtime import Batch, EventLogError, PersonaRuntime, format_time

from .errors import ReceiptError

REQUIRED = "required"
OPTIONAL = "optional"
DISABLED = "disabled"


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
        """Write a receipt (a ``receipt_id`` is assigned); ``None`` when not written."""
        if self.policy == DISABLED:
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

    def _emit(
        self, batch: Batch, kind: str, payload: dict[str, Any], *, receipt: bool
    ) -> dict[str, Any]:
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


__all__ = ["DISABLED", "OPTIONAL", "REQUIRED", "ReceiptLog"]
