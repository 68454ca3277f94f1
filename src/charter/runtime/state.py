"""The status projection's state and its reducer (one event at a time, no I/O).

The state is plain JSON-able data so it can be stored as a snapshot; ``apply`` is the
only way it changes. Time-derived views (lifecycle, window roll-over, live leases) are
computed later, at a given ``now``, by :mod:`charter.runtime.status`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from .clock import day_window, format_time, hour_window
from .events import Event, Kind

#: 2: the duplicate window and queued webhook bodies left the state (looked up in the
#: log: ``LogTransaction.completions``, the ``persona.work.queued`` event); a version 1
#: snapshot is ignored and the persona replayed once
PROJECTION_VERSION = 2
RECENT_VALUE_RECEIPTS = 20
RECENT_DEAD_LETTERS = 20


#: queue entry fields taken from a ``persona.work.queued`` payload when present
_QUEUE_EXTRAS = (
    "handoff_id",
    "coalesce_key",
    "delivery_id",
    "attempt",
    "reasons",
    "prior_runs",
    "body_event_id",
    "not_before",
)
#: run fields taken from a ``persona.run.started`` payload when present (a retry's)
_RUN_EXTRAS = (
    "attempt",
    "reasons",
    "prior_runs",
    "body_event_id",
    "delivery_id",
    "coalesce_key",
    "provider",
    "kind",
    "metadata",
    "cost_usd",
    "tokens",
)


def _spend_zero() -> dict[str, Any]:
    return {
        "hour": None,
        "hour_usd": 0.0,
        "day": None,
        "day_usd": 0.0,
        "day_tokens": 0,
        "total_usd": 0.0,
        "total_tokens": 0,
    }


@dataclass
class PersonaState:
    persona: str
    version: str | None = None
    seen: bool = False
    control: str = "active"  # active | paused | draining | disabled
    last_event_id: int = 0
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    leases: dict[str, dict[str, Any]] = field(default_factory=dict)
    last_run: dict[str, Any] | None = None
    last_failed: bool = False
    spend: dict[str, Any] = field(default_factory=_spend_zero)
    exhaustion: dict[str, Any] | None = None
    last_budget_receipt_id: str | None = None
    # queued work in arrival order; a webhook's body stays in its ``persona.work.queued``
    # event (``event_id``), read when the item is admitted: the state is decoded in every
    # write transaction, and bodies would make it grow with the queue's bytes
    queue: list[dict[str, Any]] = field(default_factory=list)
    # run_id -> the parked run (waiting for an approval without a lease)
    parked: dict[str, dict[str, Any]] = field(default_factory=dict)
    inbox: list[dict[str, Any]] = field(default_factory=list)
    value_receipts: list[dict[str, Any]] = field(default_factory=list)
    value_receipt_count: int = 0
    dead_lettered: int = 0
    # the latest dead letters with their reasons (and attempts, for work that used them up)
    dead_letters: list[dict[str, Any]] = field(default_factory=list)
    last_error: str | None = None
    counters: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self.__dict__)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PersonaState:
        return cls(**copy.deepcopy(data))

    @classmethod
    def adopt(cls, data: dict[str, Any]) -> PersonaState:
        """Like :meth:`from_dict` without the deep copy, for ``data`` no one else holds
        (a snapshot just decoded from the store)."""
        return cls(**data)

    def shallow_dict(self) -> dict[str, Any]:
        """The fields without a deep copy, for serialising at once (saving a snapshot)."""
        return dict(self.__dict__)

    def fork(self) -> PersonaState:
        """A copy that :func:`apply` can change without changing this one, in time
        linear in the number of entries, not their bytes: containers are copied, and so
        are the entries ``apply`` changes in place (runs, leases); queue, parked and inbox
        entries, receipts and records are only ever replaced, so they are shared."""
        fork = PersonaState.__new__(PersonaState)
        fork.__dict__.update(self.__dict__)
        fork.runs = {k: dict(v) for k, v in self.runs.items()}
        fork.leases = {k: dict(v) for k, v in self.leases.items()}
        fork.spend = dict(self.spend)
        fork.queue = list(self.queue)
        fork.parked = dict(self.parked)
        fork.inbox = list(self.inbox)
        fork.value_receipts = list(self.value_receipts)
        fork.dead_letters = list(self.dead_letters)
        fork.counters = dict(self.counters)
        return fork

    def queued_keys(self) -> set[str]:
        return {item["work_key"] for item in self.queue}


def _bump(state: PersonaState, name: str) -> None:
    state.counters[name] = state.counters.get(name, 0) + 1


def _add_spend(state: PersonaState, event: Event, cost: float, tokens: int) -> None:
    spend = state.spend
    hour, day = hour_window(event.occurred_at), day_window(event.occurred_at)
    if spend["hour"] != hour:
        spend["hour"], spend["hour_usd"] = hour, 0.0
    if spend["day"] != day:
        spend["day"], spend["day_usd"], spend["day_tokens"] = day, 0.0, 0
    spend["hour_usd"] = round(spend["hour_usd"] + cost, 9)
    spend["day_usd"] = round(spend["day_usd"] + cost, 9)
    spend["day_tokens"] += tokens
    spend["total_usd"] = round(spend["total_usd"] + cost, 9)
    spend["total_tokens"] += tokens


def _finish_run(state: PersonaState, event: Event, status: str) -> dict[str, Any]:
    p = event.payload
    run = state.runs.pop(p.get("run_id", ""), None) or {}
    record = {
        "run_id": p.get("run_id"),
        "work_key": p.get("work_key", run.get("work_key")),
        "status": status,
        "started_at": run.get("started_at"),
        "finished_at": format_time(event.occurred_at),
        "cost_usd": p.get("cost_usd", 0.0),
        "tokens": p.get("tokens", 0),
        "error": p.get("error"),
        "handoff_id": run.get("handoff_id"),
    }
    state.last_run = record
    return record


def _dequeue(queue: list[dict[str, Any]], work_key: object) -> None:
    """Take ``work_key``'s entry out of ``queue`` (in place: a fork has its own list).

    A key is queued at most once at a time (every writer checks ``Batch.is_queued``
    under the log's lock), and the queue is drained in order: the entry is found at the
    front. Rebuilding the whole list per dequeue, as before, made folding a backlog of
    thousands quadratic (14% of a replica's time at load, runtime_fleet.py)."""
    for index, item in enumerate(queue):
        if item["work_key"] == work_key:
            del queue[index]
            return


def apply(state: PersonaState, event: Event) -> None:
    """Fold one event into ``state`` (in place)."""
    p = event.payload
    kind = event.kind
    state.seen = True
    state.last_event_id = max(state.last_event_id, event.event_id)
    if event.persona_version:
        state.version = event.persona_version
    at = format_time(event.occurred_at)

    if kind == Kind.LEASE_ACQUIRED:
        state.leases[p["lease_id"]] = {
            "lease_id": p["lease_id"],
            "holder": p.get("holder"),
            "work_key": p.get("work_key"),
            "run_id": p.get("run_id"),
            "acquired_at": p.get("acquired_at", at),
            "expires_at": p["expires_at"],
        }
    elif kind == Kind.LEASE_RENEWED:
        lease = state.leases.get(p.get("lease_id", ""))
        if lease is not None:
            lease["expires_at"] = p["expires_at"]
    elif kind == Kind.LEASE_RELEASED:
        state.leases.pop(p.get("lease_id", ""), None)
    elif kind == Kind.LEASE_EXPIRED:
        lease = state.leases.pop(p.get("lease_id", ""), None)
        run_id = p.get("run_id") or (lease or {}).get("run_id")
        if run_id and run_id in state.runs:
            state.runs.pop(run_id)
            state.last_run = {
                "run_id": run_id,
                "work_key": p.get("work_key"),
                "status": "failed",
                "started_at": None,
                "finished_at": at,
                "cost_usd": 0.0,
                "tokens": 0,
                "error": "lease expired before the run finished",
                "handoff_id": None,
            }
            state.last_failed = True
            state.last_error = "lease expired before the run finished"
        _bump(state, "leases_expired")
    elif kind == Kind.LEASE_CONFLICT:
        _bump(state, "lease_conflicts")
    elif kind == Kind.RUN_STARTED:
        state.runs[p["run_id"]] = {
            "run_id": p["run_id"],
            "work_key": p.get("work_key"),
            "lease_id": p.get("lease_id"),
            "phase": "starting",
            "started_at": at,
            "source": p.get("source"),
            "handoff_id": p.get("handoff_id"),
            **{k: p[k] for k in _RUN_EXTRAS if p.get(k) is not None},
            # the body it started with (work admitted without queueing: see engine)
            **({"body_event_id": event.event_id} if p.get("body") is not None else {}),
        }
        state.exhaustion = None
        if p.get("budget_receipt_id"):
            state.last_budget_receipt_id = p["budget_receipt_id"]
        if p.get("handoff_id"):
            state.inbox = [h for h in state.inbox if h.get("handoff_id") != p["handoff_id"]]
        _bump(state, "runs_started")
    elif kind == Kind.RUN_PARKED:
        run = state.runs.get(p.get("run_id", ""))
        if run is not None:
            run["phase"] = "parked"
            run["lease_id"] = None
        state.parked[p["run_id"]] = {
            "run_id": p["run_id"],
            "work_key": p.get("work_key"),
            "approval_id": p.get("approval_id"),
            "call_id": p.get("call_id"),
            "tool": p.get("tool"),
            "parked_at": at,
            "event_id": event.event_id,
        }
        _bump(state, "runs_parked")
    elif kind == Kind.RUN_UNPARKED:
        state.parked.pop(p.get("run_id", ""), None)
        run = state.runs.get(p.get("run_id", ""))
        if run is not None:
            run["phase"] = "running"
            run["lease_id"] = p.get("lease_id")
    elif kind == Kind.RUN_RUNNING:
        run = state.runs.get(p.get("run_id", ""))
        if run is not None:
            run["phase"] = "running"
    elif kind == Kind.RUN_COMPLETED:
        record = _finish_run(state, event, "completed")
        _add_spend(state, event, float(p.get("cost_usd", 0.0)), int(p.get("tokens", 0)))
        state.last_failed = False
        key = record["work_key"]
        # (the duplicate window is not kept here: it grows with every completed key for
        # a whole window; the runtime looks keys up with LogTransaction.completions)
        receipt = {
            "receipt_id": p.get("receipt_id") or record["run_id"],
            "run_id": record["run_id"],
            "work_key": key,
            "cost_usd": record["cost_usd"],
            "tokens": record["tokens"],
            "at": at,
        }
        state.value_receipts = [*state.value_receipts, receipt][-RECENT_VALUE_RECEIPTS:]
        state.value_receipt_count += 1
        _bump(state, "runs_completed")
    elif kind == Kind.RUN_FAILED:
        _finish_run(state, event, "failed")
        _add_spend(state, event, float(p.get("cost_usd", 0.0)), int(p.get("tokens", 0)))
        state.last_failed = True
        state.last_error = p.get("error") or "run failed"
        _bump(state, "runs_failed")
    elif kind == Kind.RUN_DUPLICATE:
        _bump(state, "duplicates")
        if p.get("handoff_id"):  # a handoff already run leaves the inbox too
            state.inbox = [h for h in state.inbox if h.get("handoff_id") != p["handoff_id"]]
    elif kind == Kind.SPEND_RECORDED:
        _add_spend(state, event, float(p.get("cost_usd", 0.0)), int(p.get("tokens", 0)))
        if p.get("budget_receipt_id"):
            state.last_budget_receipt_id = p["budget_receipt_id"]
    elif kind == Kind.BUDGET_EXHAUSTED:
        state.exhaustion = {
            "reason": p.get("reason"),
            "window": p.get("window"),
            "receipt_id": p.get("receipt_id"),
            "limit": p.get("limit"),
            "at": at,
        }
        state.last_budget_receipt_id = p.get("receipt_id")
        _bump(state, "budget_exhausted")
    elif kind == Kind.WORK_QUEUED:
        state.queue.append(
            {
                "work_key": p["work_key"],
                "source": p.get("source"),
                "provider": p.get("provider"),
                "kind": p.get("kind"),
                "metadata": p.get("metadata", {}),
                "cost_usd": p.get("cost_usd", 0.0),
                "tokens": p.get("tokens", 0),
                "queued_at": at,
                "event_id": event.event_id,
                **({"has_body": True} if p.get("body") is not None else {}),
                # (issue 31) what a drained item needs besides its body: the handoff it
                # runs, the newer work that may supersede it, its attempt and the event
                # that holds its body when it is a retry, and when it may start
                **{k: p[k] for k in _QUEUE_EXTRAS if p.get(k) is not None},
            }
        )
    elif kind == Kind.WORK_COALESCED:
        _bump(state, "coalesced")
    elif kind == Kind.WORK_DEQUEUED:
        _dequeue(state.queue, p.get("work_key"))
    elif kind == Kind.DEAD_LETTERED:
        state.dead_lettered += 1
        letter = {
            "work_key": p.get("work_key"),
            "reason": p.get("reason"),
            "at": at,
            "event_id": event.event_id,
            **{k: p[k] for k in ("run_id", "attempts", "reasons", "delivery_id") if p.get(k)},
        }
        state.dead_letters = [*state.dead_letters, letter][-RECENT_DEAD_LETTERS:]
        if p.get("attempts"):  # work that used up its attempts (issue 31)
            state.last_error = p.get("reason") or state.last_error
            _bump(state, "attempts_exhausted")
        if p.get("handoff_id"):  # a refused handoff leaves the inbox
            state.inbox = [h for h in state.inbox if h.get("handoff_id") != p["handoff_id"]]
    elif kind == Kind.WORK_RETRIED:
        _bump(state, "retries")
    elif kind == Kind.DELIVERY_DUPLICATE:
        _bump(state, "duplicate_deliveries")
    elif kind == Kind.PAUSED:
        state.control = "paused"
    elif kind == Kind.RESUMED:
        state.control = "draining" if p.get("draining") else "active"
    elif kind == Kind.DRAIN_COMPLETED:
        if state.control == "draining":
            state.control = "active"
    elif kind == Kind.DISABLED:
        state.control = "disabled"
    elif kind == Kind.ENABLED:
        state.control = "active"
    elif kind == Kind.HANDOFF_RECEIVED:
        state.inbox.append(
            {
                "handoff_id": p["handoff_id"],
                "kind": p.get("kind"),
                "from": p.get("from"),
                "route_id": p.get("route_id"),
                "summary": p.get("summary"),
                "payload": p.get("payload", {}),
                "policy_override": p.get("policy_override"),
                "audit": p.get("audit", {}),
                "received_at": at,
            }
        )
    elif kind == Kind.HANDOFF_ACCEPTED:
        state.inbox = [h for h in state.inbox if h.get("handoff_id") != p.get("handoff_id")]
    elif kind == Kind.HANDOFF_DISPATCHED:
        _bump(state, "handoffs_dispatched")
    elif kind in (Kind.TRIGGER_RECEIVED, Kind.SCHEDULE_FIRED):
        _bump(state, "wakes")
