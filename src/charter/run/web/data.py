"""What the console shows, read from the event log (one short-lived log per call)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from charter.runtime import (
    Event,
    EventLog,
    Kind,
    PersonaRuntime,
    PersonaRuntimeSpec,
    StateCache,
    format_time,
    open_event_log,
    supervision_frame,
)

from .. import evidence
from ..approvals import resolve_approval
from ..events import APPROVAL_RESOLUTIONS, RunKind
from ..session import RunOptions, load_checked_manifest, runtime_specs
from . import timeline
from .change import would_change
from .series import COMPLETED, DEAD, DENIALS, DUPLICATE, FAILED, SPEND, Series, hour_of

WINDOWS = {"24h": (24, "hour"), "7d": (7, "day"), "30d": (30, "day")}

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
    FOLDED = (RunKind.APPROVAL_REQUESTED, *sorted(APPROVAL_RESOLUTIONS))

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cursor = 0
        self.pending: dict[str, dict[str, Any]] = {}

    def update(self, log: EventLog) -> list[dict[str, Any]]:
        with self.lock:
            last = log.last_event_id()
            while True:
                page = log.read(after=self.cursor, limit=5000, kinds=self.FOLDED)
                for event in page:
                    self._fold(event)
                    self.cursor = event.event_id
                if len(page) < 5000:
                    break
            self.cursor = max(self.cursor, last)  # nothing of ours up to ``last``
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
                # the tool's preview (charter.agent.Tool.preview): the exact request it sends
                "request": event.payload.get("request"),
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
        # each persona's newest event id, and the states read so far (the runtime's
        # StateCache): a persona with nothing new since is rendered from its held state
        # without a read, so a fleet page costs one read of the new events, not one
        # snapshot and tail per persona
        self._latest: dict[str, int] = {}
        self._alone: dict[str, PersonaRuntimeSpec] = {}
        self._primed = False  # with a manifest: the first read skipped the log's past
        self._scan = threading.Lock()
        self.cache = StateCache()
        self.earning: set[str] = set()  # personas with promotion criteria (issue 18)
        self.series = Series()
        self.personas: dict[str, Any] = {}  # name -> charter.manifest.Persona
        self.workspace: Path | None = (
            Path(options.workspace) if options.workspace is not None else None
        )
        if options.manifest is not None:
            manifest = load_checked_manifest(options.manifest)
            self.specs, self.routes = runtime_specs(manifest)
            self.earning = {p.name for p in manifest.personas if p.rollout_policy.promotion}
            self.personas = {p.name: p for p in manifest.personas}
            if self.workspace is None:  # as a run's default workspace: the manifest's folder
                base = Path(options.manifest)
                self.workspace = base.parent if base.is_file() else base

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

    def _scan_new(self, log: EventLog) -> None:
        """Note the personas of the events appended since the last call (and their newest ids)."""
        with self._scan:
            if self.specs and not self._primed:
                # with a manifest the personas are known: no need to read the log's past;
                # a persona's first status is read from the log, later ones held (below)
                self._cursor = log.last_event_id()
                self._primed = True
                return
            while True:
                page = log.read(after=self._cursor, limit=5000)
                for event in page:
                    if event.persona != "charter.audit":  # signed checkpoints, not a persona
                        self._seen.add(event.persona)
                        self._latest[event.persona] = event.event_id
                if page:
                    self._cursor = page[-1].event_id
                if len(page) < 5000:
                    return

    def _runtime(self, log: EventLog) -> PersonaRuntime:
        self._scan_new(log)
        specs = self.specs
        if not specs:  # console alone on a state: the personas the log knows (incremental)
            if len(self._alone) != len(self._seen):
                self._alone = {n: PersonaRuntimeSpec(name=n) for n in self._seen}
            specs = self._alone
        return PersonaRuntime(
            log, specs, routes=self.routes, actor="charter-console", cache=self.cache
        )

    def _status(self, runtime: PersonaRuntime, name: str, now: datetime) -> dict[str, Any]:
        """The persona's status: from the held state when the log has nothing newer of it."""
        held = self.cache.get(name)
        fresh = held is not None and held[0].last_event_id >= self._latest.get(name, 0)
        return runtime.status(name, now=now, held=fresh).to_dict()

    def fleet(self, names: Iterable[str] | None = None) -> dict[str, Any]:
        """Every persona's status (or only ``names``: the live feed's row refresh)."""
        now = self.clock()
        with self.log() as log:
            last = log.last_event_id()  # the page's feed continues strictly after this
            runtime = self._runtime(log)
            known = set(runtime.personas)
            wanted = sorted(known if names is None else known & set(names))
            rows = [self._status(runtime, name, now) for name in wanted]
            for row in rows:
                row["standing"] = (
                    evidence.load(log, row["name"]).standing
                    if row["name"] in self.earning
                    else None
                )
            pending = self.pending.update(log)
            self.series.update(log)
        waiting: dict[str, int] = {}
        for item in pending:
            waiting[item["persona"]] = waiting.get(item["persona"], 0) + 1
        for row in rows:
            row["pending_approvals"] = waiting.get(row["name"], 0)
            found = self.personas.get(row["name"])
            row["tier"] = found.autonomy_tier.value if found is not None else None
            runs, spend = self.series.sparklines(row["name"], now)
            row["sparklines"] = {"runs": runs, "spend_usd": spend}
        first = hour_of(now) - 23
        return {
            "at": format_time(now),
            "last_event_id": last,
            "personas": rows,
            "pending_approvals": len(pending),
            # the sparklines' buckets: 24 UTC hours, the first starting here
            "sparkline_hours": [
                format_time(datetime.fromtimestamp((first + k) * 3600, UTC)) for k in range(24)
            ],
        }

    def persona(self, name: str, window: str = "24h") -> dict[str, Any] | None:
        """One persona: its status, charter, charts' series over ``window``, recent runs."""
        from charter.policy import effective

        if window not in WINDOWS:
            raise ValueError(f"window: expected one of {', '.join(WINDOWS)}, got {window!r}")
        now = self.clock()
        with self.log() as log:
            runtime = self._runtime(log)
            if name not in runtime.personas:
                return None
            status = self._status(runtime, name, now)
            pending = [p for p in self.pending.update(log) if p["persona"] == name]
            self.series.update(log)
            rollout = None
            manifest = self.personas.get(name)
            if manifest is not None and manifest.rollout_policy.promotion:
                from ..promotion import report

                found = evidence.load(log, name)
                status["standing"] = found.standing
                rollout = report(manifest, found, now)
                days = WINDOWS[window][0] if window != "24h" else 1
                rollout["daily"] = _agreement_by_day(found, now, days)
        count, unit = WINDOWS[window]
        rows = (
            self.series.hourly(name, now, count)
            if unit == "hour"
            else self.series.daily(name, now, count)
        )
        step = timedelta(hours=1) if unit == "hour" else timedelta(days=1)
        end = now.replace(minute=0, second=0, microsecond=0)
        if unit == "day":
            end = end.replace(hour=0)
        starts = [end - step * (count - 1 - k) for k in range(count)]
        limits = status["budget"]["limits"]
        series = {
            "window": window,
            "unit": unit,
            "buckets": [format_time(t) for t in starts],
            "labels": [t.strftime("%H:%M" if unit == "hour" else "%m-%d") for t in starts],
            "runs": {
                "completed": [int(r[COMPLETED]) for r in rows],
                "failed": [int(r[FAILED]) for r in rows],
                "duplicate": [int(r[DUPLICATE]) for r in rows],
                "dead_lettered": [int(r[DEAD]) for r in rows],
            },
            "spend_usd": [round(r[SPEND], 6) for r in rows],
            "spend_cap_usd": limits.get("hourly_usd" if unit == "hour" else "daily_usd"),
            "denials": [int(r[DENIALS]) for r in rows],
            "denials_per_run": [
                round(r[DENIALS] / (r[COMPLETED] + r[FAILED]), 4)
                if r[COMPLETED] + r[FAILED]
                else None
                for r in rows
            ],
        }
        charter = None
        if manifest is not None:
            charter = {
                "autonomy_tier": manifest.autonomy_tier.value,
                "rollout_policy": {
                    "mode": manifest.rollout_policy.mode,
                    "percentage": manifest.rollout_policy.percentage,
                    "cohorts": list(manifest.rollout_policy.cohorts),
                },
                "budget": limits,
                "policy": effective([manifest.frame()]),
            }
        return {
            "at": format_time(now),
            "name": name,
            "status": status,
            "charter": charter,
            "series": series,
            "rollout": rollout,
            "recent_runs": self.series.recent(name),
            "pending_approvals": pending,
        }

    def control(self, name: str, action: str, *, by: str, to: str | None = None) -> dict[str, Any]:
        """Pause, resume or promote ``name``, recorded as ``by`` (the event's actor; a
        promotion's ``by`` too): the same events as ``charter persona pause|resume|promote``."""
        with self.log() as log:
            runtime = self._runtime(log)
            runtime.actor = by
            if name not in runtime.personas:
                raise KeyError(name)
            at = self.clock()
            if action == "promote":
                from ..promotion import promote

                manifest = self.personas.get(name)
                if manifest is None:
                    from ..promotion import PromotionError

                    raise PromotionError(
                        f"{name}: the console was started without the manifest, so the "
                        "promotion criteria are unknown; start it with --manifest"
                    )
                entry = promote(runtime, manifest, to or "", at=at, by=by)
                return {"action": "promote", "persona": name, "changed": True, **entry}
            if action not in ("pause", "resume"):
                raise ValueError(f"action: expected pause, resume or promote, got {action!r}")
            receipt = getattr(runtime, action)(name, at=at)
            return {**receipt.to_dict(), "by": by}

    def approvals(self) -> list[dict[str, Any]]:
        """Pending approvals, each with the decision (frame, rule, reason) that asks and
        what the call would change (``change``: a diff, a command, a PR's summary)."""
        with self.log() as log:
            pending = self.pending.update(log)
            for item in pending:
                trigger = _trigger_of(log, item["persona"], item["run_id"], item["event_id"])
                item["change"] = would_change(
                    str(item.get("tool") or ""),
                    item.get("arguments") or {},
                    workspace=self.workspace,
                    trigger=trigger,
                )
            return pending

    def run(self, run_id: str) -> dict[str, Any] | None:
        """The run's events in order, its receipts with their decisions, and its record."""
        from charter.runtime.audit import chain_status

        with self.log() as log:
            self.series.update(log)
            # the run's persona (known from its persona.run.started): read its events only
            owner = self.series.persona_of(run_id)
            events = [e for e in log.iter_all(persona=owner) if e.payload.get("run_id") == run_id]
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
        spend = {"cost_usd": 0.0, "input_tokens": 0, "output_tokens": 0, "model_calls": 0}
        for event in events:
            if event.kind == RunKind.USAGE_RECORDED:
                cost = float(event.payload.get("cost_usd") or 0)
                spend["cost_usd"] = round(spend["cost_usd"] + cost, 9)
                spend["input_tokens"] += int(event.payload.get("input_tokens") or 0)
                spend["output_tokens"] += int(event.payload.get("output_tokens") or 0)
                spend["model_calls"] += 1
        return {
            "run_id": run_id,
            "persona": events[0].persona,
            "status": (record or {}).get("status") or _status_of(events),
            "timeline": timeline.build(events, record),
            "spend": spend,
            "handoffs": (record or {}).get("handoffs") or [],
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


def _status_of(events: list[Event]) -> str:
    for event in reversed(events):
        if event.kind.startswith("persona.run."):
            return event.kind.removeprefix("persona.run.")
    return "unknown"


def _trigger_of(log: EventLog, persona: str, run_id: str, before: int) -> dict[str, Any] | None:
    """The trigger (envelope) that started a waiting run: its ``persona.run.parked``
    (serve) or its ``persona.run.recorded``; ``None`` while neither is written."""
    for event in log.read(after=max(0, before - 1), persona=persona, limit=200,
                          kinds=(Kind.RUN_PARKED, RunKind.RUN_RECORDED)):  # fmt: skip
        if event.payload.get("run_id") != run_id:
            continue
        if event.kind == Kind.RUN_PARKED:
            envelope = event.payload.get("envelope")
            return envelope if isinstance(envelope, dict) else None
        record = event.payload.get("record") or {}
        return record.get("trigger") if isinstance(record.get("trigger"), dict) else None
    return None


def _agreement_by_day(found: evidence.Evidence, now: datetime, days: int) -> dict[str, Any]:
    """Agreement per UTC day over ``days`` days: rate and Wilson interval (``None``: no
    judged outcome that day), summed over arms and cohorts."""
    from ..promotion import wilson

    first = (now - timedelta(days=days - 1)).strftime("%Y-%m-%d")
    labels = [(now - timedelta(days=days - 1 - k)).strftime("%Y-%m-%d") for k in range(days)]
    agreed = dict.fromkeys(labels, 0.0)
    judged = dict.fromkeys(labels, 0.0)
    for key, counters in found.buckets.items():
        day = evidence.split_key(key)[0]
        if day >= first and day in agreed:
            agreed[day] += counters.get("agreed", 0)
            judged[day] += counters.get("agreed", 0) + counters.get("disagreed", 0)
    rates: list[float | None] = []
    lows: list[float | None] = []
    highs: list[float | None] = []
    for day in labels:
        if judged[day]:
            low, high = wilson(agreed[day], judged[day])
            rates.append(round(agreed[day] / judged[day], 4))
            lows.append(round(low, 4))
            highs.append(round(high, 4))
        else:
            rates.append(None)
            lows.append(None)
            highs.append(None)
    return {
        "days": labels,
        "agreed": [int(agreed[d]) for d in labels],
        "judged": [int(judged[d]) for d in labels],
        "rate": rates,
        "wilson_low": lows,
        "wilson_high": highs,
    }


__all__ = ["WINDOWS", "ConsoleData"]
