"""What the console shows, read from the event log (one short-lived log per call)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from charter.runtime import (
    Event,
    EventLog,
    PersonaRuntime,
    PersonaRuntimeSpec,
    format_time,
    open_event_log,
    supervision_frame,
)

from .. import evidence
from ..approvals import resolve_approval
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


class PendingApprovals:
    """``pending_approvals`` folded incrementally (a cursor): a page load reads only new events."""

    KEYS = ("run_id", "call_id", "approval_id", "tool", "arguments", "side_effect_level", "stage")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cursor = 0
        self.pending: dict[str, dict[str, Any]] = {}

    def update(self, log: EventLog) -> list[dict[str, Any]]:
        with self.lock:
            while True:
                page = log.read(after=self.cursor, limit=5000)
                for event in page:
                    self._fold(event)
                    self.cursor = event.event_id
                if len(page) < 5000:
                    break
            return [dict(item) for item in self.pending.values()]

    def _fold(self, event: Event) -> None:
        aid = event.payload.get("approval_id")
        if not aid:
            return
        if event.kind == RunKind.APPROVAL_REQUESTED:
            self.pending[aid] = {
                "persona": event.persona,
                "event_id": event.event_id,
                "requested_at": format_time(event.occurred_at),
                **{k: event.payload.get(k) for k in self.KEYS},
                "decision": _decision(event.payload),
            }
        elif event.kind in APPROVAL_RESOLUTIONS:
            self.pending.pop(aid, None)


class ConsoleData:
    """The console's reads and its one write (approval decisions)."""

    def __init__(self, options: RunOptions, *, clock: Callable[[], datetime]) -> None:
        self.options = options
        self.clock = clock
        self.specs: dict[str, PersonaRuntimeSpec] = {}
        self.routes: tuple[Any, ...] = ()
        self.pending = PendingApprovals()
        self._seen: set[str] = set()  # console alone: personas found in the log so far
        self._cursor = 0
        self.earning: set[str] = set()  # personas with promotion criteria (issue 18)
        if options.manifest is not None:
            manifest = load_checked_manifest(options.manifest)
            self.specs, self.routes = runtime_specs(manifest)
            self.earning = {p.name for p in manifest.personas if p.rollout_policy.promotion}

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
                if event.persona != "charter.audit":  # signed checkpoints, not a persona
                    self._seen.add(event.persona)
                self._cursor = event.event_id
            specs = {n: PersonaRuntimeSpec(name=n) for n in self._seen}
        return PersonaRuntime(log, specs, routes=self.routes, actor="charter-console")

    def fleet(self, names: Iterable[str] | None = None) -> dict[str, Any]:
        """Every persona's status (or only ``names``: the live feed's row refresh)."""
        now = self.clock()
        with self.log() as log:
            last = log.last_event_id()  # the page's feed continues strictly after this
            runtime = self._runtime(log)
            known = set(runtime.personas)
            wanted = sorted(known if names is None else known & set(names))
            rows = [runtime.status(name, now=now).to_dict() for name in wanted]
            for row in rows:
                row["standing"] = (
                    evidence.load(log, row["name"]).standing
                    if row["name"] in self.earning
                    else None
                )
            pending = self.pending.update(log)
        for row in rows:
            row["pending_approvals"] = sum(1 for p in pending if p["persona"] == row["name"])
        return {
            "at": format_time(now),
            "last_event_id": last,
            "personas": rows,
            "pending_approvals": len(pending),
        }

    def approvals(self) -> list[dict[str, Any]]:
        """Pending approvals, each with the decision (frame, rule, reason) that asks."""
        with self.log() as log:
            return self.pending.update(log)

    def run(self, run_id: str) -> dict[str, Any] | None:
        """The run's events in order, its receipts with their decisions, and its record."""
        from charter.runtime.audit import chain_status

        with self.log() as log:
            events = [e for e in log.iter_all() if e.payload.get("run_id") == run_id]
            chain = chain_status(log, [e.event_id for e in events])
        if not events:
            return None
        receipts = []
        record: dict[str, Any] | None = None
        transcript: list[dict[str, Any]] = []
        for event in events:
            if event.kind == RunKind.RUN_RECORDED:
                record = event.payload.get("record")
            if event.kind == RunKind.RUN_TRANSCRIPT:
                transcript.extend(event.payload.get("agents") or [])
            if event.kind in RECEIPT_KINDS or "receipt_id" in event.payload:
                receipts.append({**supervision_frame(event), "decision": _decision(event.payload)})
        return {
            "run_id": run_id,
            "persona": events[0].persona,
            "events": [supervision_frame(e) for e in events],
            "receipts": receipts,
            "record": record,
            "transcript": transcript,  # one entry per ctx.agent() call of the run
            "hash_chain": chain,  # None: written before the log had a chain
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

    def inbox(self) -> list[dict[str, Any]]:
        """Open ``human:`` inbox items (:mod:`charter.runtime.inbox`)."""
        from charter.runtime import inbox

        with self.log() as log:
            return inbox.items(log)

    def acknowledge(self, item_id: str, *, by: str, note: str | None) -> dict[str, Any]:
        """Acknowledge an inbox item: the same event as ``charter inbox ack``."""
        from charter.runtime import inbox

        with self.log() as log:
            runtime = PersonaRuntime(log, {}, actor="charter-console")
            return inbox.acknowledge(runtime, item_id, at=self.clock(), by=by, note=note)


__all__ = ["ConsoleData"]
