"""The status view: projected state rendered at a given ``now``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .budget import exhaustion_active, spent_in_windows
from .clock import format_time, parse_time
from .schedules import next_scheduled_run
from .spec import PersonaRuntimeSpec
from .state import PersonaState

LIFECYCLE_STATES = (
    "inactive",
    "starting",
    "idle",
    "running",
    "paused",
    "draining",
    "failed",
    "disabled",
)


def live_leases(state: PersonaState, now: datetime) -> list[dict[str, Any]]:
    return [lease for lease in state.leases.values() if parse_time(lease["expires_at"]) > now]


def lifecycle(state: PersonaState, now: datetime) -> str:
    """Derive the lifecycle state (see docs/runtime.md for the precedence)."""
    if state.control == "disabled":
        return "disabled"
    if state.control == "paused":
        return "paused"
    if state.control == "draining":
        return "draining"
    held = live_leases(state, now)
    live = {lease["run_id"] for lease in held}
    phases = {run["phase"] for run_id, run in state.runs.items() if run_id in live}
    if "running" in phases:
        return "running"
    if "starting" in phases:
        return "starting"
    # An expired lease not yet recovered is a run that died (seed: the expired run counts
    # as failed); status says so before the next acquisition appends persona.lease.expired.
    if state.last_failed or len(held) < len(state.leases):
        return "failed"
    if not state.seen:
        return "inactive"
    return "idle"


@dataclass(frozen=True)
class PersonaStatus:
    name: str
    version: str | None
    lifecycle: str
    at: str
    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "lifecycle": self.lifecycle,
            **self.data,
        }


def render_status(state: PersonaState, spec: PersonaRuntimeSpec, now: datetime) -> PersonaStatus:
    hour_usd, day_usd, day_tokens = spent_in_windows(state.spend, now)
    active_exhaustion = exhaustion_active(state.exhaustion, now)
    exhaustion = state.exhaustion if active_exhaustion else None
    upcoming = next_scheduled_run(spec.schedules, now=now)
    leases = sorted(live_leases(state, now), key=lambda lease: lease["acquired_at"])
    stale = [lease for lease in state.leases.values() if lease not in leases]
    stale_runs = {lease["run_id"] for lease in stale}
    data: dict[str, Any] = {
        "at": format_time(now),
        "last_run": state.last_run,
        "next_scheduled_run": format_time(upcoming) if upcoming else None,
        "schedules": list(spec.schedules),
        "leases": leases,
        "expired_leases": stale,
        # Only runs still holding a live lease are active; a run whose lease expired is
        # listed under expired_leases (its lease) until recovery records it as failed.
        "active_runs": sorted(
            (
                run
                for run_id, run in state.runs.items()
                if run_id not in stale_runs and run_id not in state.parked
            ),
            key=lambda run: run["started_at"],
        ),
        "budget": {
            "limits": spec.budget.to_dict(),
            "spent": {
                "hour_usd": hour_usd,
                "day_usd": day_usd,
                "day_tokens": day_tokens,
                "total_usd": state.spend["total_usd"],
                "total_tokens": state.spend["total_tokens"],
            },
            "exhausted": active_exhaustion,
            "exhaustion_reason": exhaustion["reason"] if exhaustion else None,
            "exhaustion": exhaustion,
            "last_receipt_id": state.last_budget_receipt_id,
        },
        "queue": {"count": len(state.queue), "items": state.queue},
        "parked_runs": sorted(state.parked.values(), key=lambda run: run["parked_at"]),
        "inbox": {"count": len(state.inbox), "items": state.inbox},
        "value_receipts": {
            "count": state.value_receipt_count,
            "recent": state.value_receipts,
        },
        "dead_lettered": state.dead_lettered,
        "dead_letters": state.dead_letters,
        "last_error": state.last_error,
        "counters": dict(sorted(state.counters.items())),
        "last_event_id": state.last_event_id,
    }
    return PersonaStatus(
        spec.name, state.version or spec.version, lifecycle(state, now), data["at"], data
    )
