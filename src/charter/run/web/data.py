"""What the console shows, read from the event log (one short-lived log per call)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from charter.runtime import (
    EventLog,
    PersonaRuntime,
    PersonaRuntimeSpec,
    format_time,
    open_event_log,
    supervision_frame,
)

from ..approvals import pending_approvals, resolve_approval
from ..events import APPROVAL_RESOLUTIONS, RunKind
from ..session import RunOptions, load_checked_manifest, runtime_specs

RECEIPT_KINDS = frozenset(
    {
        RunKind.TOOL_EXECUTING,
        RunKind.TOOL_EXECUTED,
        RunKind.TOOL_DENIED,
        RunKind.TOOL_DRY_RUN,
        RunKind.TOOL_PROPOSED,
        RunKind.BUDGET_RESERVED,
        RunKind.USAGE_RECORDED,
        RunKind.MODEL_ESCALATED,
        RunKind.MODEL_ESCALATION_REFUSED,
        RunKind.MODEL_FALLBACK,
        RunKind.APPROVAL_REQUESTED,
        *APPROVAL_RESOLUTIONS,
    }
)


def _decision(payload: dict[str, Any]) -> dict[str, Any]:
    """Frame, rule, reason and dimension of a receipt's policy decision, if any."""
    decision = payload.get("decision")
    if not isinstance(decision, dict):
        return {}
    frame = decision.get("frame")
    return {
        "outcome": decision.get("decision"),
        "dimension": decision.get("dimension"),
        "frame": frame.get("label") if isinstance(frame, dict) else frame,
        "rule": decision.get("rule"),
        "reason": decision.get("reason"),
    }


class ConsoleData:
    """The console's reads and its one write (approval decisions)."""

    def __init__(self, options: RunOptions, *, clock: Callable[[], datetime]) -> None:
        self.options = options
        self.clock = clock
        self.specs: dict[str, PersonaRuntimeSpec] = {}
        self.routes: tuple[Any, ...] = ()
        self._seen: set[str] = set()  # console alone: personas found in the log so far
        self._cursor = 0
        if options.manifest is not None:
            self.specs, self.routes = runtime_specs(load_checked_manifest(options.manifest))

    @contextmanager
    def log(self) -> Iterator[EventLog]:
        log = open_event_log(
            state_dir=self.options.state_dir, url=self.options.state_url, env=self.options.env
        )
        try:
            yield log
        finally:
            log.close()

    def ready(self) -> dict[str, Any]:
        with self.log() as log:
            return {"ready": True, "backend": log.backend, "last_event_id": log.last_event_id()}

    def _runtime(self, log: EventLog) -> PersonaRuntime:
        specs = dict(self.specs)
        if not specs:  # console alone on a state: the personas the log knows (incremental)
            for event in log.read(after=self._cursor):
                self._seen.add(event.persona)
                self._cursor = event.event_id
            specs = {n: PersonaRuntimeSpec(name=n) for n in self._seen}
        return PersonaRuntime(log, specs, routes=self.routes, actor="charter-console")

    def fleet(self) -> dict[str, Any]:
        now = self.clock()
        with self.log() as log:
            runtime = self._runtime(log)
            rows = [runtime.status(name, now=now).to_dict() for name in sorted(runtime.personas)]
            pending = pending_approvals(log)
        for row in rows:
            row["pending_approvals"] = sum(1 for p in pending if p["persona"] == row["name"])
        return {"at": format_time(now), "personas": rows, "pending_approvals": len(pending)}

    def approvals(self) -> list[dict[str, Any]]:
        """Pending approvals, each with the decision (frame, rule, reason) that asks."""
        with self.log() as log:
            pending = pending_approvals(log)
            for item in pending:
                (request,) = log.read(after=item["event_id"] - 1, limit=1)
                item["decision"] = _decision(request.payload)
        return pending

    def run(self, run_id: str) -> dict[str, Any] | None:
        """The run's events in order, its receipts with their decisions, and its record."""
        with self.log() as log:
            events = [e for e in log.iter_all() if e.payload.get("run_id") == run_id]
        if not events:
            return None
        receipts = []
        record: dict[str, Any] | None = None
        for event in events:
            if event.kind == RunKind.RUN_RECORDED:
                record = event.payload.get("record")
            if event.kind in RECEIPT_KINDS or "receipt_id" in event.payload:
                receipts.append({**supervision_frame(event), "decision": _decision(event.payload)})
        return {
            "run_id": run_id,
            "persona": events[0].persona,
            "events": [supervision_frame(e) for e in events],
            "receipts": receipts,
            "record": record,
            "hash_chain": None,  # the log has no hash chain yet
        }

    def decide(
        self, run_id: str, call_id: str, *, granted: bool, by: str, reason: str | None
    ) -> dict[str, Any]:
        """Approve or deny a pending call: the same event and receipt as ``charter approve``."""
        with self.log() as log:
            runtime = PersonaRuntime(log, {}, actor="charter-console")
            return resolve_approval(
                runtime,
                run_id,
                call_id,
                status="granted" if granted else "denied",
                at=self.clock(),
                by=by,
                reason=reason,
            )


__all__ = ["ConsoleData"]
