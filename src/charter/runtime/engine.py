"""``PersonaRuntime``: admits work under leases and budgets and records it in the log.

Every operation runs inside one exclusive write transaction of the log: the persona's
state is loaded (snapshot + tail), the decision is made, the events are appended and the
new snapshot saved before commit. A killed process therefore leaves either all of an
operation's events and its snapshot, or none of them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar, cast

from charter.errors import CharterError

from .budget import check_budget
from .clock import add_seconds, ensure_utc, format_time, parse_time
from .events import Event, Kind, NewEvent
from .follow import Admitted, Follow, FollowFailed, Follows
from .ids import EventIds, IdFactory
from .log import Completion, EventLog, LogTransaction
from .projection import (
    StateCache,
    StatusProjection,
    load_state,
    prefetch,
    save_state,
    snapshot_every,
)
from .receipts import ControlReceipt, LeaseInfo, ReceiptStatus, RunReceipt
from .spec import HandoffRoute, PersonaRuntimeSpec
from .state import PersonaState, apply
from .status import PersonaStatus, lifecycle, live_leases, render_status
from .triggers import NormalizedTrigger, declares_trigger, normalize_trigger

T = TypeVar("T")
_UNKNOWN: Any = object()
#: queued keys a drain transaction reads the duplicate window of with its lock
_DRAIN_AHEAD = 4


#: the sources of work that is offered again when its run's lease expires (a schedule's
#: minute too: a crashed scheduled run ran at most part of its work)
_RETRIED_SOURCES = frozenset({"trigger", "queue", "schedule", "handoff"})

#: a drain's finish admits the next item only when at least this many wait (follow.py;
#: at most _DRAIN_AHEAD)
FOLLOW_BACKLOG = 2


class PersonaRuntimeError(CharterError):
    """Base class for refusals that are the caller's fault (bad input, unknown names)."""


class UnknownPersonaError(PersonaRuntimeError):
    def __init__(self, message: str, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name


class UndeclaredTriggerError(PersonaRuntimeError):
    pass


class UnknownRunError(PersonaRuntimeError):
    pass


@dataclass(frozen=True)
class WorkItem:
    """One unit of work offered to a persona."""

    work_key: str
    source: str  # "schedule" | "trigger" | "handoff" | "queue"
    cost_usd: float = 0.0
    tokens: int = 0
    provider: str | None = None
    kind: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    handoff_id: str | None = None
    # the webhook body the work came with; kept only while the work waits in a queue
    body: Mapping[str, Any] | None = None
    #: the sender's id of the delivery that brought it (a redelivery is refused by it)
    delivery_id: str | None = None
    #: newer queued work with the same coalesce key supersedes this while it waits
    coalesce_key: str | None = None
    #: 1 for the first attempt; a retry after an expired lease is 2, 3, ...
    attempt: int = 1
    #: why earlier attempts ended (a retry's)
    reasons: tuple[str, ...] = ()
    #: the runs of the earlier attempts, oldest first (their journal is replayed)
    prior_runs: tuple[str, ...] = ()
    #: the event holding the webhook body (a drained or retried item's)
    body_event_id: int | None = None

    def __post_init__(self) -> None:
        if not self.work_key:
            raise PersonaRuntimeError("work needs a work key")
        if self.cost_usd < 0 or self.tokens < 0:
            raise PersonaRuntimeError("cost and tokens must be >= 0")

    def payload(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "work_key": self.work_key,
            "source": self.source,
            "cost_usd": self.cost_usd,
            "tokens": self.tokens,
        }
        if self.provider:
            out.update(provider=self.provider, kind=self.kind, metadata=self.metadata)
        if self.handoff_id:
            out["handoff_id"] = self.handoff_id
        if self.delivery_id:
            out["delivery_id"] = self.delivery_id
        if self.coalesce_key:
            out["coalesce_key"] = self.coalesce_key
        if self.attempt > 1:
            out["attempt"] = self.attempt
            out["reasons"] = list(self.reasons)
            out["prior_runs"] = list(self.prior_runs)
        if self.body_event_id is not None:
            out["body_event_id"] = self.body_event_id
        return out


class Batch:
    """Events of one transaction, applied to the in-memory states as they are emitted."""

    def __init__(
        self,
        txn: LogTransaction,
        runtime: PersonaRuntime,
        at: datetime,
    ) -> None:
        self.txn = txn
        self.runtime = runtime
        self.at = at
        self.next_id = txn.last_event_id() + 1
        self.events: list[Event] = []
        self.pending: list[NewEvent] = []
        self.states: dict[str, PersonaState] = {}
        self.tails: dict[str, int] = {}  # events after each persona's stored snapshot
        # (persona, work key) -> its latest completion: looked up in the log, or emitted
        # in this batch (which the log has not seen yet)
        self.completions: dict[tuple[str, str], Completion | None] = {}
        # each persona's queued keys, built once and kept with the queue's events: built
        # per webhook, it cost a pass over the whole backlog per item
        self._queued: dict[str, set[str]] = {}
        # (persona, delivery id) -> the event that received it (this batch's included)
        self.deliveries: dict[tuple[str, str], int | None] = {}

    def state(self, persona: str) -> PersonaState:
        if persona not in self.states:
            self.states[persona], self.tails[persona] = load_state(
                self.txn, persona, self.runtime.projection.cache
            )
        return self.states[persona]

    def is_queued(self, persona: str, work_key: str) -> bool:
        """Whether ``work_key`` waits in ``persona``'s queue (as of this batch)."""
        keys = self._queued.get(persona)
        if keys is None:
            keys = self._queued[persona] = self.state(persona).queued_keys()
        return work_key in keys

    def completion(self, persona: str, work_key: str) -> Completion | None:
        """The latest ``persona.run.completed`` of ``work_key`` (the duplicate window)."""
        found = self.completions.get((persona, work_key), _UNKNOWN)
        if found is _UNKNOWN:
            found = self.txn.completions(persona, [work_key]).get(work_key)
            self.completions[(persona, work_key)] = found
        return cast("Completion | None", found)

    def delivery(self, persona: str, delivery_id: str) -> int | None:
        """The event that received ``delivery_id`` for ``persona``, if any."""
        key = (persona, delivery_id)
        if key not in self.deliveries:
            self.deliveries[key] = self.txn.deliveries(persona, [delivery_id]).get(delivery_id)
        return self.deliveries[key]

    def new_id(self, prefix: str) -> str:
        return self.runtime.ids.new_id(prefix, self.next_id)

    def emit(self, persona: str, kind: str, payload: dict[str, Any]) -> Event:
        state = self.state(persona)
        spec = self.runtime.personas.get(persona)
        new = NewEvent(
            persona,
            kind,
            self.at,
            payload,
            actor=self.runtime.actor,
            persona_version=spec.version if spec else None,
        )
        event = Event(
            self.next_id,
            self.txn_topic(),
            persona,
            kind,
            new.occurred_at,
            payload,
            new.actor,
            new.persona_version,
        )
        self.next_id += 1
        apply(state, event)
        keys = self._queued.get(persona)
        if keys is not None:  # as apply changed the queue (a dequeue removes every entry)
            if kind == Kind.WORK_QUEUED:
                keys.add(payload["work_key"])
            elif kind == Kind.WORK_DEQUEUED:
                keys.discard(payload.get("work_key", ""))
        if kind == Kind.DELIVERY_RECEIVED:
            self.deliveries[(persona, payload["delivery_id"])] = event.event_id
        if kind == Kind.RUN_COMPLETED and payload.get("work_key"):
            key = payload["work_key"]
            self.completions[(persona, key)] = Completion(
                key, event.event_id, payload.get("run_id"), payload.get("duplicate_until")
            )
        self.pending.append(new)
        self.events.append(event)
        return event

    def txn_topic(self) -> str:
        return self.runtime.log.topic

    def commit(self) -> None:
        if not self.pending:
            return
        appended = self.txn.append(self.pending)
        if [e.event_id for e in appended] != [e.event_id for e in self.events]:
            raise AssertionError("event ids changed under the write lock")
        tails = self.tails
        for event in self.events:
            tails[event.persona] = tails.get(event.persona, 0) + 1
        for persona in {e.persona for e in self.events}:
            if tails[persona] >= snapshot_every(self.states[persona]):
                save_state(self.txn, self.states[persona])
                tails[persona] = 0

    def committed(self) -> None:
        """The transaction committed: its states are the latest (held for later reads)."""
        cache = self.runtime.projection.cache
        for persona, state in self.states.items():
            cache.put(persona, state, self.tails[persona])


class PersonaRuntime:
    """The continuous persona runtime over one :class:`EventLog`."""

    def __init__(
        self,
        log: EventLog,
        personas: Mapping[str, PersonaRuntimeSpec] | Iterable[PersonaRuntimeSpec],
        *,
        routes: Sequence[HandoffRoute] = (),
        ids: IdFactory | None = None,
        holder: str = "charter",
        actor: str = "charter",
        cache: StateCache | None = None,
    ) -> None:
        self.log = log
        if isinstance(personas, Mapping):
            self.personas: dict[str, PersonaRuntimeSpec] = dict(personas)
        else:
            self.personas = {p.name: p for p in personas}
        self.routes = tuple(routes)
        self.ids: IdFactory = ids or EventIds()
        self.holder = holder
        self.actor = actor
        # ``cache``: shared with other runtimes over the same log (one per thread of a
        # replica), each persona's new events are read and folded once between them
        self.projection = StatusProjection(log, cache=cache)
        self._follows = Follows()  # a drain's next admission, per thread (see follow.py)

    # -- helpers -----------------------------------------------------------

    def spec(self, name: str) -> PersonaRuntimeSpec:
        try:
            return self.personas[name]
        except KeyError:
            known = ", ".join(sorted(self.personas)) or "none"
            raise UnknownPersonaError(f"unknown persona {name!r} (known: {known})", name) from None

    def transact(
        self,
        at: datetime,
        body: Callable[[Batch], T],
        *,
        persona: str | None = None,
        work_keys: Sequence[str] = (),
        personas: Mapping[str, Sequence[str]] | None = None,
    ) -> T:
        """Run ``body`` in one exclusive transaction; its emitted events commit atomically.

        ``persona``: the persona whose state ``body`` reads first, and ``work_keys`` the
        keys whose duplicate window it checks, which the backend may read with the
        transaction's first round trip; ``personas``: several, each with its keys."""
        at = ensure_utc(at)
        cache = self.projection.cache
        wanted = dict(personas or {})
        if persona is not None:
            wanted = {persona: work_keys, **wanted}
        ahead = [prefetch(name, keys, cache) for name, keys in wanted.items()]
        with self.log.write(prefetch=ahead) as txn:
            batch = Batch(txn, self, at)
            result = body(batch)
            batch.commit()
        batch.committed()  # (not on an exception: a state of a rolled-back batch is dropped)
        return result

    def _expire(self, batch: Batch, name: str) -> None:
        """Recover expired leases: ``persona.lease.expired`` precedes any new acquisition.

        The expired run's work is offered again (issue 31): ``persona.work.retried`` and
        a ``persona.work.queued`` of attempt n + 1, startable after the backoff, for any
        replica's drain; after ``max_attempts`` it is dead-lettered with its attempts
        and the reason of each. A half-done run's journal is replayed by the retry
        (model responses and tool results already recorded are not repeated)."""
        state = batch.state(name)
        spec = self.spec(name)
        for lease in sorted(state.leases.values(), key=lambda lease: lease["acquired_at"]):
            if parse_time(lease["expires_at"]) <= batch.at:
                run = dict(state.runs.get(lease.get("run_id") or "", {}))
                batch.emit(
                    name,
                    Kind.LEASE_EXPIRED,
                    {
                        "lease_id": lease["lease_id"],
                        "run_id": lease["run_id"],
                        "work_key": lease["work_key"],
                        "holder": lease["holder"],
                        "expired_at": lease["expires_at"],
                    },
                )
                if run and run.get("source") in _RETRIED_SOURCES:
                    self._retry(batch, name, spec, lease, run)

    def _retry(
        self,
        batch: Batch,
        name: str,
        spec: PersonaRuntimeSpec,
        lease: Mapping[str, Any],
        run: Mapping[str, Any],
    ) -> None:
        """Offer an expired run's work again, or dead-letter it after its attempts."""
        attempt = int(run.get("attempt") or 1)
        reason = (
            f"attempt {attempt}: lease {lease['lease_id']} held by {lease['holder']} "
            f"expired at {lease['expires_at']} before run {lease['run_id']} finished"
        )
        reasons = [*[str(r) for r in run.get("reasons") or ()], reason]
        base: dict[str, Any] = {
            "work_key": lease["work_key"],
            "run_id": lease["run_id"],
            "source": run.get("source"),
        }
        for key in ("handoff_id", "delivery_id"):
            if run.get(key):
                base[key] = run[key]
        if attempt >= spec.max_attempts:
            batch.emit(
                name,
                Kind.DEAD_LETTERED,
                {
                    **base,
                    "reason": f"gave up after {attempt} attempts (max_attempts "
                    f"{spec.max_attempts}): {reason}",
                    "attempts": attempt,
                    "reasons": reasons,
                },
            )
            return
        wait = spec.retry_backoff_seconds * (2 ** (attempt - 1))
        not_before = format_time(add_seconds(batch.at, wait))
        batch.emit(
            name,
            Kind.WORK_RETRIED,
            {**base, "attempt": attempt + 1, "reason": reason, "not_before": not_before},
        )
        queued: dict[str, Any] = {
            **{k: run.get(k) for k in ("provider", "kind", "metadata", "cost_usd", "tokens")},
            **base,
            "attempt": attempt + 1,
            "reasons": reasons,
            # the runs whose journal the next attempt replays (charter.run.parking)
            "prior_runs": [*[str(r) for r in run.get("prior_runs") or ()], lease["run_id"]],
            "not_before": not_before,
            "policy": "retry_after_lease_expired",
            "reason": "retry",
        }
        queued.pop("run_id")
        if run.get("body_event_id") is not None:
            queued["body_event_id"] = run["body_event_id"]
        if run.get("coalesce_key"):
            queued["coalesce_key"] = run["coalesce_key"]
        if batch.is_queued(name, lease["work_key"]):
            return  # (already offered again by a redelivery: that entry is the retry)
        batch.emit(name, Kind.WORK_QUEUED, {k: v for k, v in queued.items() if v is not None})

    # -- queries -----------------------------------------------------------

    def state(self, name: str) -> PersonaState:
        self.spec(name)
        return self.projection.state(name)

    def status(self, name: str, *, now: datetime, held: bool = False) -> PersonaStatus:
        """The persona's status at ``now``. ``held``: as of this runtime's own last read
        or write of it, without reading the log (a run's status right after its own
        admission); read when nothing is held."""
        return render_status(self._state(name, held), self.spec(name), ensure_utc(now))

    def _state(self, name: str, held: bool) -> PersonaState:
        found = self.projection.cache.get(name) if held else None
        return found[0].fork() if found is not None else self.state(name)

    # -- work --------------------------------------------------------------

    def tick(
        self,
        name: str,
        *,
        at: datetime,
        cost_usd: float = 0.0,
        tokens: int = 0,
        work_key: str | None = None,
        hold: bool = False,
        error: str | None = None,
    ) -> RunReceipt:
        """A schedule wake; its work key is ``schedule:<persona>:<minute>`` unless given."""
        self.spec(name)
        at = ensure_utc(at)
        key = work_key or f"schedule:{name}:{at.strftime('%Y-%m-%dT%H:%MZ')}"
        item = WorkItem(key, "schedule", cost_usd, tokens)
        return self.submit(name, item, at=at, hold=hold, error=error)

    def trigger(
        self,
        name: str,
        *,
        provider: str,
        kind: str | None,
        at: datetime,
        metadata: Mapping[str, str] | None = None,
        payload: Mapping[str, Any] | None = None,
        cost_usd: float = 0.0,
        tokens: int = 0,
        force: bool = False,
        hold: bool = False,
        error: str | None = None,
        rerun: str | None = None,
        defer: bool = False,
    ) -> RunReceipt:
        """An external trigger, normalised to a work key; undeclared kinds need ``force``.

        ``rerun`` runs the same trigger again under ``<work key>#rerun:<rerun>``: the
        explicit way past duplicate detection (which otherwise holds for every retry).
        """
        item = self.trigger_item(
            name,
            provider=provider,
            kind=kind,
            metadata=metadata,
            payload=payload,
            cost_usd=cost_usd,
            tokens=tokens,
            force=force,
            rerun=rerun,
        )
        if defer:  # record it for a worker (serve): see accept()
            return self.accept(name, item, at=at)
        return self.submit(name, item, at=at, hold=hold, error=error)

    def trigger_item(
        self,
        name: str,
        *,
        provider: str,
        kind: str | None,
        metadata: Mapping[str, str] | None = None,
        payload: Mapping[str, Any] | None = None,
        cost_usd: float = 0.0,
        tokens: int = 0,
        force: bool = False,
        rerun: str | None = None,
        delivery_id: str | None = None,
    ) -> WorkItem:
        """The work item of a trigger for ``name`` (checked as :meth:`trigger` does),
        without recording anything: for :meth:`accept_many`. ``delivery_id``: the
        sender's id of the delivery (a redelivery of it is refused)."""
        spec = self.spec(name)
        normalized: NormalizedTrigger = normalize_trigger(provider, kind, metadata, payload=payload)
        if not force and not declares_trigger(spec.triggers, normalized.provider, normalized.kind):
            declared = ", ".join(spec.triggers) or "none"
            raise UndeclaredTriggerError(
                f"persona {name!r} does not declare trigger "
                f"{normalized.provider}.{normalized.kind} (declared: {declared}); "
                "use --force to record it anyway"
            )
        return WorkItem(
            normalized.work_key + (f"#rerun:{rerun}" if rerun else ""),
            "trigger",
            cost_usd,
            tokens,
            normalized.provider,
            normalized.kind,
            normalized.metadata,
            body=dict(payload) if payload is not None else None,
            delivery_id=delivery_id,
            coalesce_key=None if rerun else normalized.coalesce_key,
        )

    def submit(
        self,
        name: str,
        item: WorkItem,
        *,
        at: datetime,
        hold: bool = False,
        error: str | None = None,
    ) -> RunReceipt:
        """Offer ``item`` to ``name``: queue, dead-letter, refuse or run it."""
        self.spec(name)
        return self.transact(
            at,
            lambda b: self._submit(b, name, item, hold, error, False),
            persona=name,
            work_keys=(item.work_key,),
        )

    def accept(self, name: str, item: WorkItem, *, at: datetime) -> RunReceipt:
        """Record ``item`` durably for a worker to run later (``charter serve``'s webhooks).

        Work for an active persona is queued FIFO (``persona.work.queued``, reason
        ``accepted``; one entry per key) unless its key completed within the duplicate
        window (``duplicate``) or waits parked for an approval (``lease_busy``); paused and
        disabled personas answer as :meth:`submit` does. Whoever drains the queue
        (:meth:`drain`) runs it, on this host or another: a crash after acceptance loses
        nothing.
        """
        self.spec(name)
        return self.transact(
            at,
            lambda b: self._submit(b, name, item, False, None, False, True),
            persona=name,
            work_keys=(item.work_key,),
        )

    def accept_many(
        self, work: Sequence[tuple[str, WorkItem]], *, at: datetime
    ) -> list[RunReceipt]:
        """:meth:`accept` for many ``(persona, item)`` in one transaction (group commit).

        Items are decided in order, each seeing the ones before it: a key offered twice
        is queued once and coalesced after. All are durable together, or none is.
        """
        for name, _ in work:
            self.spec(name)
        # every persona's state and duplicate window read with the lock, in one round
        # trip (a group commit over four personas read three of them one by one after)
        keys: dict[str, list[str]] = {}
        for name, item in work:
            keys.setdefault(name, []).append(item.work_key)
        return self.transact(
            at,
            lambda b: [self._submit(b, n, i, False, None, False, True) for n, i in work],
            personas=keys,
        )

    def _wake_kind(self, item: WorkItem) -> str:
        return Kind.SCHEDULE_FIRED if item.source == "schedule" else Kind.TRIGGER_RECEIVED

    def _receipt(
        self, batch: Batch, name: str, status: ReceiptStatus, item: WorkItem, first: int, **kw: Any
    ) -> RunReceipt:
        ids = tuple(e.event_id for e in batch.events if e.event_id >= first)
        return RunReceipt(
            status=status,
            persona=name,
            work_key=item.work_key,
            at=format_time(batch.at),
            cost_usd=item.cost_usd,
            tokens=item.tokens,
            event_ids=ids,
            **kw,
        )

    def _submit(
        self,
        batch: Batch,
        name: str,
        item: WorkItem,
        hold: bool,
        error: str | None,
        from_queue: bool,
        defer: bool = False,
        running: bool = False,
    ) -> RunReceipt:
        spec = self.spec(name)
        first = batch.next_id
        self._expire(batch, name)
        state = batch.state(name)
        base = item.payload()

        def dequeue() -> None:
            if from_queue:
                batch.emit(name, Kind.WORK_DEQUEUED, {"work_key": item.work_key})

        if item.delivery_id and not from_queue:
            # delivery identity (issue 31): a redelivered webhook is refused whatever its
            # work became (queued, running, completed, failed, superseded, dead-lettered)
            first_seen = batch.delivery(name, item.delivery_id)
            if first_seen is not None:
                batch.emit(
                    name,
                    Kind.DELIVERY_DUPLICATE,
                    {
                        "delivery_id": item.delivery_id,
                        "work_key": item.work_key,
                        "first_event_id": first_seen,
                    },
                )
                return self._receipt(
                    batch,
                    name,
                    ReceiptStatus.DUPLICATE,
                    item,
                    first,
                    error=f"delivery {item.delivery_id} was received before (event {first_seen})",
                    detail={"delivery": True, "first_event_id": first_seen},
                )
            batch.emit(
                name,
                Kind.DELIVERY_RECEIVED,
                {
                    "delivery_id": item.delivery_id,
                    "work_key": item.work_key,
                    "provider": item.provider,
                    "kind": item.kind,
                },
            )

        if state.control == "disabled":
            batch.emit(name, Kind.DEAD_LETTERED, {**base, "reason": "persona disabled"})
            dequeue()
            return self._receipt(
                batch, name, ReceiptStatus.DEAD_LETTERED, item, first, error="persona is disabled"
            )
        if state.control == "paused" and not from_queue:
            if batch.is_queued(name, item.work_key):
                batch.emit(name, Kind.WORK_COALESCED, base)
                return self._receipt(
                    batch, name, ReceiptStatus.QUEUED, item, first, detail={"coalesced": True}
                )
            batch.emit(name, self._wake_kind(item), base)
            self._supersede(batch, name, item)
            batch.emit(
                name,
                Kind.WORK_QUEUED,
                {**base, **_body(item), "policy": "queue_then_drain_on_resume"},
            )
            return self._receipt(
                batch, name, ReceiptStatus.QUEUED, item, first, detail={"coalesced": False}
            )

        live = live_leases(state, batch.at)
        holding = next((lease for lease in live if lease["work_key"] == item.work_key), None)
        parked = next((r for r in state.parked.values() if r["work_key"] == item.work_key), None)
        if parked is not None:
            # the key's run waits for an approval: the same work must not start twice
            return self._busy(
                batch, name, item, first, {**base, "reason": "run_parked",
                "run_id": parked["run_id"]},
                run_id=parked["run_id"],
                error=f"run {parked['run_id']} of this work key is parked waiting for "
                f"approval {parked['approval_id']}",
            )  # fmt: skip
        if holding is None and not from_queue and state.control == "active":
            if batch.is_queued(name, item.work_key):
                batch.emit(name, Kind.WORK_COALESCED, base)
                return self._receipt(
                    batch, name, ReceiptStatus.QUEUED, item, first, detail={"coalesced": True}
                )
            fresh = not _within_window(batch.completion(name, item.work_key), batch.at)
            waiting = _first_due(state.queue, batch.at) is not None  # (a retry in backoff: no)
            if fresh and (defer or len(live) >= spec.max_concurrency or waiting):
                # A different key at capacity waits its turn (FIFO); so does anything
                # arriving behind queued work, so the queue is never overtaken.
                reason = "max_concurrency" if len(live) >= spec.max_concurrency else "queue"
                reason = "accepted" if defer else reason
                batch.emit(name, self._wake_kind(item), base)
                self._supersede(batch, name, item)
                batch.emit(
                    name,
                    Kind.WORK_QUEUED,
                    {**base, **_body(item), "policy": "fifo_until_lease_free", "reason": reason},
                )
                return self._receipt(
                    batch,
                    name,
                    ReceiptStatus.QUEUED,
                    item,
                    first,
                    detail={
                        "coalesced": False,
                        "reason": reason,
                        "position": len(state.queue),
                        "running": len(live),
                    },
                )
        done = batch.completion(name, item.work_key)
        recent = _within_window(done, batch.at)
        if holding is not None or (len(live) >= spec.max_concurrency and not recent):
            reason = "work_key_leased" if holding else "max_concurrency"
            busy = holding or live[0]
            return self._busy(
                batch, name, item, first,
                {**base, "reason": reason, "held_by": busy["lease_id"], "holder": busy["holder"]},
                lease=_lease_info(busy),
                error=f"lease busy ({reason}): {busy['lease_id']} held by {busy['holder']}",
            )  # fmt: skip

        if done is not None and recent:
            batch.emit(name, Kind.RUN_DUPLICATE, {**base, "original_run_id": done.run_id})
            dequeue()
            return self._receipt(
                batch,
                name,
                ReceiptStatus.DUPLICATE,
                item,
                first,
                run_id=done.run_id,
                detail={"duplicate_until": done.duplicate_until},
            )

        refusal = check_budget(
            spec.budget, state.spend, cost_usd=item.cost_usd, tokens=item.tokens, at=batch.at
        )
        if refusal is not None:
            receipt_id = batch.new_id("budget")
            batch.emit(
                name,
                Kind.BUDGET_EXHAUSTED,
                {**base, **refusal.to_payload(), "receipt_id": receipt_id},
            )
            return self._receipt(
                batch,
                name,
                ReceiptStatus.BUDGET_EXHAUSTED,
                item,
                first,
                budget_receipt_id=receipt_id,
                exhaustion_reason=refusal.reason,
                error=f"budget exhausted: {refusal.reason} (limit {refusal.limit:g})",
            )

        # Admitted: wake + lease + run start are one atomic group.
        dequeue()
        if not from_queue:
            batch.emit(name, self._wake_kind(item), base)
        run_id = batch.new_id("run")
        lease_id = batch.new_id("lease")
        budget_id = batch.new_id("budget")
        lease = self._acquire(batch, name, lease_id, item.work_key, run_id)
        batch.emit(
            name,
            Kind.RUN_STARTED,
            {
                **base,
                "run_id": run_id,
                "lease_id": lease_id,
                "budget_receipt_id": budget_id,
                # a body no earlier event holds (work admitted without queueing): kept
                # here, so that a retry after its process died is handed it too
                **(_body(item) if hold and item.body_event_id is None and held_body(item) else {}),
            },
        )
        if hold and running:
            # the caller starts the workflow at once: what its first heartbeat would have
            # recorded, in the admission's transaction (one write fewer per run)
            batch.emit(name, Kind.RUN_RUNNING, {"run_id": run_id})
        if hold:
            return self._receipt(
                batch,
                name,
                ReceiptStatus.STARTED,
                item,
                first,
                run_id=run_id,
                lease=lease,
                budget_receipt_id=budget_id,
            )
        self._finish(
            batch, name, run_id, lease_id, item.work_key, item.cost_usd, item.tokens, error
        )
        return self._receipt(
            batch,
            name,
            ReceiptStatus.FAILED if error else ReceiptStatus.COMPLETED,
            item,
            first,
            run_id=run_id,
            lease=lease,
            budget_receipt_id=budget_id,
            error=error,
        )

    def _supersede(self, batch: Batch, name: str, item: WorkItem) -> None:
        """Coalescing, explicit and recorded (issue 31): queued work that ``item``
        supersedes (the same coalesce key: an older push to the ref, an older head of the
        pull request) leaves the queue with ``persona.work.coalesced`` naming the work
        it became (``into``); that work's run is the one it ran as. Work already running
        is never superseded: the newer head runs after it."""
        if not item.coalesce_key:
            return
        state = batch.state(name)
        for queued in [q for q in state.queue if q.get("coalesce_key") == item.coalesce_key]:
            if queued["work_key"] == item.work_key:
                continue
            batch.emit(
                name,
                Kind.WORK_COALESCED,
                {
                    "work_key": queued["work_key"],
                    "into": item.work_key,
                    "coalesce_key": item.coalesce_key,
                    "reason": "superseded",
                    **({"delivery_id": queued["delivery_id"]} if queued.get("delivery_id") else {}),
                },
            )
            batch.emit(
                name,
                Kind.WORK_DEQUEUED,
                {"work_key": queued["work_key"], "superseded_by": item.work_key},
            )

    def _busy(
        self,
        batch: Batch,
        name: str,
        item: WorkItem,
        first: int,
        conflict: dict[str, Any],
        **receipt: Any,
    ) -> RunReceipt:
        """``persona.lease.conflict`` and a ``lease_busy`` receipt: the key cannot start."""
        batch.emit(name, Kind.LEASE_CONFLICT, conflict)
        return self._receipt(batch, name, ReceiptStatus.LEASE_BUSY, item, first, **receipt)

    def _acquire(
        self, batch: Batch, name: str, lease_id: str, work_key: str, run_id: str
    ) -> LeaseInfo:
        """Take a lease for ``run_id`` (TTL from now) and record ``persona.lease.acquired``."""
        spec = self.spec(name)
        lease = LeaseInfo(
            lease_id,
            self.holder,
            work_key,
            format_time(batch.at),
            format_time(add_seconds(batch.at, spec.lease_ttl_seconds)),
        )
        batch.emit(name, Kind.LEASE_ACQUIRED, {**lease.to_dict(), "run_id": run_id})
        return lease

    def _finish(
        self,
        batch: Batch,
        name: str,
        run_id: str,
        lease_id: str,
        work_key: str,
        cost_usd: float,
        tokens: int,
        error: str | None,
    ) -> None:
        spec = self.spec(name)
        payload: dict[str, Any] = {
            "run_id": run_id,
            "work_key": work_key,
            "cost_usd": cost_usd,
            "tokens": tokens,
        }
        if error:
            batch.emit(name, Kind.RUN_FAILED, {**payload, "error": error})
        else:
            until = add_seconds(batch.at, spec.duplicate_window_seconds)
            batch.emit(name, Kind.RUN_COMPLETED, {**payload, "duplicate_until": format_time(until)})
        batch.emit(name, Kind.LEASE_RELEASED, {"lease_id": lease_id, "run_id": run_id})

    def heartbeat(self, name: str, run_id: str, *, at: datetime) -> LeaseInfo:
        """Renew a held run's lease (TTL from ``at``); the first heartbeat marks it running."""
        spec = self.spec(name)

        def body(batch: Batch) -> LeaseInfo:
            self._expire(batch, name)
            state = batch.state(name)
            run = state.runs.get(run_id)
            lease = state.leases.get(run["lease_id"]) if run else None
            if run is None or lease is None:
                raise UnknownRunError(f"{name}: no live run {run_id!r} (finished or expired)")
            expires = format_time(add_seconds(batch.at, spec.lease_ttl_seconds))
            batch.emit(
                name, Kind.LEASE_RENEWED, {"lease_id": lease["lease_id"], "expires_at": expires}
            )
            if run["phase"] == "starting":
                batch.emit(name, Kind.RUN_RUNNING, {"run_id": run_id})
            return _lease_info(state.leases[lease["lease_id"]])

        return self._commit_or_raise(at, body, name)

    def park_run(self, name: str, run_id: str, *, at: datetime, payload: Mapping[str, Any]) -> int:
        """Park a held run that waits for an approval: ``persona.run.parked`` (with
        ``payload``: what resuming needs) and its lease released, in one transaction.

        A parked run holds no lease and so no worker and no concurrency slot; it never
        expires (an approval never turns into an allow by waiting). Returns the event id.
        """
        self.spec(name)

        def body(batch: Batch) -> int:
            self._expire(batch, name)
            state = batch.state(name)
            run = state.runs.get(run_id)
            if run is None or run.get("lease_id") not in state.leases:
                raise UnknownRunError(f"{name}: no live run {run_id!r} to park")
            lease_id = run["lease_id"]  # the parked event clears it from the run
            event = batch.emit(
                name,
                Kind.RUN_PARKED,
                {**payload, "run_id": run_id, "work_key": run["work_key"]},
            )
            batch.emit(name, Kind.LEASE_RELEASED, {"lease_id": lease_id, "run_id": run_id})
            return event.event_id

        return self._commit_or_raise(at, body, name)

    def unpark_run(self, name: str, run_id: str, *, at: datetime) -> RunReceipt | None:
        """Take a parked run up again under a new lease (receipt ``started``), or ``None``
        while the persona is at ``max_concurrency`` (it stays parked)."""
        spec = self.spec(name)

        def body(batch: Batch) -> RunReceipt | None:
            self._expire(batch, name)
            state = batch.state(name)
            parked = state.parked.get(run_id)
            if parked is None:
                raise UnknownRunError(f"{name}: run {run_id!r} is not parked")
            if len(live_leases(state, batch.at)) >= spec.max_concurrency:
                return None
            first = batch.next_id
            lease = self._acquire(batch, name, batch.new_id("lease"), parked["work_key"], run_id)
            batch.emit(
                name,
                Kind.RUN_UNPARKED,
                {"run_id": run_id, "lease_id": lease.lease_id, "work_key": parked["work_key"]},
            )
            return self._receipt(
                batch,
                name,
                ReceiptStatus.STARTED,
                WorkItem(parked["work_key"], "parked"),
                first,
                run_id=run_id,
                lease=lease,
            )

        return self._commit_or_raise(at, body, name)

    def _commit_or_raise(
        self,
        at: datetime,
        body: Callable[[Batch], T],
        persona: str,
        work_keys: Sequence[str] = (),
    ) -> T:
        # Expired-lease recovery must persist even if the body then refuses.
        captured: list[BaseException] = []

        def guarded(batch: Batch) -> T | None:
            try:
                return body(batch)
            except PersonaRuntimeError as exc:
                captured.append(exc)
                return None

        result = self.transact(at, guarded, persona=persona, work_keys=work_keys)
        if captured:
            raise captured[0]
        return cast(T, result)  # no refusal: whatever the body returned

    def finish_run(
        self,
        name: str,
        run_id: str,
        *,
        at: datetime,
        cost_usd: float = 0.0,
        tokens: int = 0,
        error: str | None = None,
        also: Callable[[Batch, RunReceipt], None] | None = None,
    ) -> RunReceipt:
        """Complete (or fail) a held run, charging its actual cost and releasing its lease.

        ``also(batch, receipt)`` runs inside the same transaction after the run's end is
        emitted and may emit more (the run's record): they commit together or not at all.
        """
        self.spec(name)
        follow = self._follows.get(name)

        def body(batch: Batch, follow: Follow | None = follow) -> RunReceipt:
            first = batch.next_id
            self._expire(batch, name)
            state = batch.state(name)
            run = state.runs.get(run_id)
            if run is None:
                raise UnknownRunError(f"{name}: no live run {run_id!r} (finished or expired)")
            lease = state.leases[run["lease_id"]]
            self._finish(
                batch, name, run_id, run["lease_id"], run["work_key"], cost_usd, tokens, error
            )
            item = WorkItem(run["work_key"], run.get("source") or "schedule", cost_usd, tokens)
            receipt = self._receipt(
                batch,
                name,
                ReceiptStatus.FAILED if error else ReceiptStatus.COMPLETED,
                item,
                first,
                run_id=run_id,
                lease=_lease_info(lease),
                error=error,
            )
            if also is not None:
                also(batch, receipt)
            if follow is not None:  # the drain's next item, in the same transaction
                follow.stage(batch)
            return receipt

        if follow is None:
            return self._commit_or_raise(at, body, name)
        try:
            receipt = self._commit_or_raise(at, body, name, follow.keys)
        except FollowFailed:
            follow.dropped()  # rolled back: the run is finished alone
            return self._commit_or_raise(at, lambda batch: body(batch, None), name)
        except BaseException:
            follow.dropped()
            raise
        follow.committed()
        return receipt

    def expire_leases(self, name: str, *, at: datetime) -> list[int]:
        """Record ``persona.lease.expired`` for every lease past its expiry at ``at``."""
        self.spec(name)

        def body(batch: Batch) -> list[int]:
            self._expire(batch, name)
            return [e.event_id for e in batch.events]

        return self.transact(at, body, persona=name)

    def spend(self, name: str, *, cost_usd: float, tokens: int = 0, at: datetime) -> RunReceipt:
        """Record spend outside a run, under the same budget caps."""
        spec = self.spec(name)
        item = WorkItem(f"spend:{name}", "spend", cost_usd, tokens)

        def body(batch: Batch) -> RunReceipt:
            first = batch.next_id
            state = batch.state(name)
            refusal = check_budget(
                spec.budget, state.spend, cost_usd=cost_usd, tokens=tokens, at=batch.at
            )
            receipt_id = batch.new_id("budget")
            if refusal is not None:
                batch.emit(
                    name,
                    Kind.BUDGET_EXHAUSTED,
                    {**item.payload(), **refusal.to_payload(), "receipt_id": receipt_id},
                )
                return self._receipt(
                    batch,
                    name,
                    ReceiptStatus.BUDGET_EXHAUSTED,
                    item,
                    first,
                    budget_receipt_id=receipt_id,
                    exhaustion_reason=refusal.reason,
                    error=f"budget exhausted: {refusal.reason} (limit {refusal.limit:g})",
                )
            batch.emit(
                name,
                Kind.SPEND_RECORDED,
                {"cost_usd": cost_usd, "tokens": tokens, "budget_receipt_id": receipt_id},
            )
            return self._receipt(
                batch, name, ReceiptStatus.COMPLETED, item, first, budget_receipt_id=receipt_id
            )

        return self.transact(at, body, persona=name)

    # -- controls ----------------------------------------------------------

    def _control(
        self,
        name: str,
        action: str,
        at: datetime,
        body: Callable[[Batch, PersonaState], str | None],
    ) -> ControlReceipt:
        self.spec(name)

        def run(batch: Batch) -> ControlReceipt:
            state = batch.state(name)
            before = len(batch.events)
            message = body(batch, state)
            return ControlReceipt(
                name,
                action,
                len(batch.events) > before,
                lifecycle(state, batch.at),
                format_time(batch.at),
                message,
                event_ids=tuple(e.event_id for e in batch.events),
            )

        return self.transact(at, run, persona=name)

    def pause(self, name: str, *, at: datetime) -> ControlReceipt:
        def body(batch: Batch, state: PersonaState) -> str | None:
            if state.control == "disabled":
                return "persona is disabled; enable it first"
            if state.control == "paused":
                return "already paused"
            batch.emit(name, Kind.PAUSED, {"policy": "queue_then_drain_on_resume"})
            return None

        return self._control(name, "pause", at, body)

    def disable(self, name: str, *, at: datetime) -> ControlReceipt:
        def body(batch: Batch, state: PersonaState) -> str | None:
            if state.control == "disabled":
                return "already disabled"
            batch.emit(name, Kind.DISABLED, {"queued": len(state.queue)})
            for queued in list(state.queue):
                batch.emit(
                    name,
                    Kind.DEAD_LETTERED,
                    {**_queued_payload(queued), "reason": "persona disabled while queued"},
                )
                batch.emit(name, Kind.WORK_DEQUEUED, {"work_key": queued["work_key"]})
            return None

        return self._control(name, "disable", at, body)

    def enable(self, name: str, *, at: datetime) -> ControlReceipt:
        def body(batch: Batch, state: PersonaState) -> str | None:
            if state.control != "disabled":
                return "not disabled"
            batch.emit(name, Kind.ENABLED, {})
            return None

        return self._control(name, "enable", at, body)

    def resume(
        self,
        name: str,
        *,
        at: datetime,
        execute: Callable[[RunReceipt, dict[str, Any]], RunReceipt] | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> ControlReceipt:
        """Set the persona back to idle and drain its queue once, in arrival order.

        Each queued item runs in its own transaction under the normal lease and budget
        checks with its original cost; items refused by the budget (or a busy lease) stay
        queued. A drain interrupted by a crash is continued by the next ``resume``.

        With ``execute``, each admitted item is held (receipt ``started``) and
        ``execute(receipt, queued_item)`` runs it (and must finish it) before the next
        item is offered; its returned receipt is reported. ``charter.run`` uses this to
        run the entry workflow for drained work. ``clock``: each item is admitted at its
        own time (``clock()``), not at ``at``: a lease taken at the drain's start would be
        past its TTL by the time a later item runs after its predecessors.
        """
        start = self._control(name, "resume", at, self._resume_body(name))
        if start.lifecycle != "draining":
            return start
        drained: list[RunReceipt] = []
        event_ids = list(start.event_ids)
        pending = list(self.state(name).queue)
        for queued in pending:

            def drain(batch: Batch, queued: dict[str, Any] = queued) -> RunReceipt | None:
                return self._drain_one(batch, name, queued, hold=execute is not None)

            receipt = self.transact(
                clock() if clock is not None else at,
                drain,
                persona=name,
                work_keys=(queued["work_key"],),
            )
            if receipt is None:
                break
            if execute is not None and receipt.status is ReceiptStatus.STARTED:
                receipt = execute(receipt, self.queued_with_body(queued))
            drained.append(receipt)
            event_ids.extend(receipt.event_ids)

        def finish(batch: Batch) -> list[int]:
            if batch.state(name).control == "draining":
                batch.emit(name, Kind.DRAIN_COMPLETED, {"drained": len(drained)})
            return [e.event_id for e in batch.events]

        event_ids.extend(self.transact(clock() if clock is not None else at, finish, persona=name))
        state = self.state(name)
        return ControlReceipt(
            name,
            "resume",
            True,
            lifecycle(state, ensure_utc(at)),
            format_time(ensure_utc(at)),
            start.message,
            tuple(drained),
            tuple(event_ids),
        )

    def _resume_body(self, name: str) -> Callable[[Batch, PersonaState], str | None]:
        def body(batch: Batch, state: PersonaState) -> str | None:
            if state.control == "disabled":
                return "persona is disabled; resume does not re-enable it (use enable)"
            if state.control == "active":
                return "not paused"
            # paused, or draining after an interrupted resume
            batch.emit(
                name, Kind.RESUMED, {"draining": bool(state.queue), "queued": len(state.queue)}
            )
            return None

        return body

    def drain(
        self,
        name: str,
        *,
        at: datetime,
        execute: Callable[[RunReceipt, dict[str, Any]], RunReceipt] | None = None,
        limit: int | None = None,
        clock: Callable[[], datetime] | None = None,
        more: Callable[[str], None] | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> list[RunReceipt]:
        """Admit work queued at ``max_concurrency``, oldest first, while leases are free.

        Each item is admitted in its own transaction (expired leases are recovered
        first). The drain stops at the first item that cannot start (capacity still
        full, budget refused): that item keeps its place at the head of the queue.
        ``execute`` works as in :meth:`resume`. A paused or disabled persona is not
        drained here (``resume`` drains a paused persona's queue). ``clock`` as in
        :meth:`resume`: each item admitted at its own time. ``more(name)`` is called when
        an item was admitted for ``execute`` and, as of that admission, more items wait
        with slots free: another worker can start the next while this one runs its own.
        ``stop()`` true (a replica shutting down): nothing more is admitted, also not by
        the finish of the run in flight; what waits stays queued for others.
        """
        self.spec(name)
        done: list[RunReceipt] = []

        def one(batch: Batch) -> Admitted | None:
            self._expire(batch, name)
            if stop is not None and stop():
                return None
            state = batch.state(name)
            slots = self.spec(name).max_concurrency
            if state.control != "active" or not state.queue:
                return None
            if len(live_leases(state, batch.at)) >= slots:
                return None
            due = _first_due(state.queue, batch.at)
            if due is None:
                return None  # (only retries waiting out their backoff)
            head = dict(due)
            receipt = self._drain_one(batch, name, due, hold=execute is not None)
            if receipt is None:
                return None
            # whether more could start after this admission
            return receipt, head, bool(state.queue) and len(live_leases(state, batch.at)) < slots

        admitted: Admitted | None = None  # by the finish of the run before
        while limit is None or len(done) < limit:
            if clock is not None:
                at = clock()
            if admitted is None:
                if stop is not None and stop():
                    break
                # after an item of this drain: as of this runtime's last write (an item
                # queued since woke a worker of its own, as for a read); the first reads
                ahead = self._drain_outlook(name, ensure_utc(at), held=bool(done))
                if ahead is None:
                    break  # a read said so: no write transaction (and no lock) for nothing
                admitted = self.transact(at, one, persona=name, work_keys=ahead)
                if admitted is None:
                    break
            receipt, head, left = admitted
            admitted = None
            if execute is not None and receipt.status is ReceiptStatus.STARTED:
                if more is not None and left:
                    more(name)
                follow = limit is None or len(done) + 1 < limit
                receipt, admitted = self._execute_followed(
                    name, one, execute, receipt, head, at=ensure_utc(at), follow=follow
                )
            done.append(receipt)
            if receipt.status in (ReceiptStatus.BUDGET_EXHAUSTED, ReceiptStatus.LEASE_BUSY):
                break
        return done

    def _execute_followed(
        self,
        name: str,
        one: Callable[[Batch], Admitted | None],
        execute: Callable[[RunReceipt, dict[str, Any]], RunReceipt],
        receipt: RunReceipt,
        head: dict[str, Any],
        *,
        at: datetime,
        follow: bool,
    ) -> tuple[RunReceipt, Admitted | None]:
        """Execute an admitted item; its finish admits the next one when more wait as of
        this runtime's last write (see follow.py): that admission, if any, is returned."""
        armed: Follow | None = None
        if follow:
            keys = self._drain_outlook(name, at, held=True, finishing=receipt.run_id)
            # a backlog: more wait than the one item a replica that queued it has woken a
            # worker for (taking that one here only sent that worker to an empty queue)
            if keys is not None and len(keys) >= FOLLOW_BACKLOG:  # (keys: the queue's head)
                armed = Follow(name, one, keys)
        self._follows.arm(armed)
        try:
            result = execute(receipt, self.queued_with_body(head))
        except BaseException as exc:
            self._follows.arm(None)
            if armed is not None and armed.ready is not None:
                self._abandon(name, armed.ready[0], exc, at)
            raise
        self._follows.arm(None)
        return result, armed.ready if armed is not None else None

    def _abandon(self, name: str, receipt: RunReceipt, cause: BaseException, at: datetime) -> None:
        """Fail a run admitted for a drain that stopped before running it: recorded now,
        with the reason, instead of when its lease expires."""
        if receipt.status is not ReceiptStatus.STARTED or not receipt.run_id:
            return
        with contextlib.suppress(Exception):  # (the lease's expiry still recovers it)
            self.finish_run(
                name,
                receipt.run_id,
                at=max(at, parse_time(receipt.at)),
                error=f"not started: the drain stopped before running it ({cause!r})",
            )

    def _drain_outlook(
        self, name: str, at: datetime, *, held: bool = False, finishing: str | None = None
    ) -> tuple[str, ...] | None:
        """``None`` when a drain transaction at ``at`` would write nothing: no expired
        lease to recover and no queued item that could start (inactive, empty queue, or
        every slot held); else the keys at the queue's head, whose duplicate window the
        transaction reads with its lock (another worker may take the first meanwhile).
        Read without the write lock: work queued after this read wakes a worker of its
        own (serve's watcher), as it would after an empty transaction. ``held``: the
        state as of this runtime's own last read or write (see :meth:`status`).
        ``finishing``: a run whose finish the transaction would be (its lease counts as
        free)."""
        state = self._state(name, held)
        keys = tuple(q["work_key"] for q in state.queue[:_DRAIN_AHEAD])
        if any(parse_time(lease["expires_at"]) <= at for lease in state.leases.values()):
            return keys
        if state.control != "active" or _first_due(state.queue, at) is None:
            return None
        live = [lease for lease in live_leases(state, at) if lease.get("run_id") != finishing]
        if len(live) >= self.spec(name).max_concurrency:
            return None
        return keys

    def queued_with_body(self, queued: dict[str, Any]) -> dict[str, Any]:
        """A copy of queue entry ``queued`` with the webhook ``body`` it was queued with,
        read from its ``persona.work.queued`` event (the state keeps bodies out)."""
        item = dict(queued)
        has_body = item.pop("has_body", False) or item.get("body_event_id") is not None
        if has_body and "body" not in item:
            event_id = int(item.get("body_event_id") or item["event_id"])
            found = self.log.read(after=event_id - 1, limit=1)
            if found and found[0].event_id == event_id:
                item["body"] = found[0].payload.get("body")
        return item

    def _drain_one(
        self, batch: Batch, name: str, queued: dict[str, Any], *, hold: bool = False
    ) -> RunReceipt | None:
        """Admit the queued item; held (``hold``: the caller's ``execute`` runs it now)
        the run is recorded running with its admission."""
        state = batch.state(name)
        if state.control not in ("draining", "active"):
            return None  # paused or disabled again meanwhile
        if not batch.is_queued(name, queued["work_key"]):
            return None
        item = WorkItem(
            queued["work_key"],
            queued.get("source") or "trigger",
            float(queued.get("cost_usd", 0.0)),
            int(queued.get("tokens", 0)),
            queued.get("provider"),
            queued.get("kind"),
            dict(queued.get("metadata") or {}),
            handoff_id=queued.get("handoff_id"),
            body=queued.get("body"),
            delivery_id=queued.get("delivery_id"),
            coalesce_key=queued.get("coalesce_key"),
            attempt=int(queued.get("attempt") or 1),
            reasons=tuple(queued.get("reasons") or ()),
            prior_runs=tuple(queued.get("prior_runs") or ()),
            body_event_id=queued.get("body_event_id")
            if queued.get("body_event_id") is not None
            else (queued["event_id"] if queued.get("has_body") else None),
        )
        return self._submit(batch, name, item, hold, None, True, running=hold)

    # -- inbox -------------------------------------------------------------

    def accept_handoff(
        self,
        name: str,
        handoff_id: str,
        *,
        at: datetime,
        cost_usd: float = 0.0,
        tokens: int = 0,
        hold: bool = True,
    ) -> RunReceipt:
        """Start a run for an inbox handoff (work key ``handoff:<id>``), leaving the inbox."""
        self.spec(name)

        def body(batch: Batch) -> RunReceipt:
            state = batch.state(name)
            found = next((h for h in state.inbox if h["handoff_id"] == handoff_id), None)
            if found is None:
                raise UnknownRunError(f"{name}: no handoff {handoff_id!r} in the inbox")
            # the inbox item goes along as the work's body: queued at max_concurrency, the
            # run that drains it later (the item has left the inbox by then) is handed it
            item = WorkItem(
                f"handoff:{handoff_id}",
                "handoff",
                cost_usd,
                tokens,
                handoff_id=handoff_id,
                body=dict(found),
            )
            return self._submit(batch, name, item, hold, None, False)

        return self._commit_or_raise(at, body, name, (f"handoff:{handoff_id}",))


def held_body(item: WorkItem) -> bool:
    """Whether a run of ``item`` could be retried and needs its body kept (a held trigger
    or handoff run that carries one)."""
    return item.body is not None and item.source in _RETRIED_SOURCES


def _first_due(queue: Sequence[dict[str, Any]], at: datetime) -> dict[str, Any] | None:
    """The oldest queued item that may start at ``at``: a retry waits out its backoff
    (``not_before``) without holding up the work behind it."""
    for queued in queue:
        not_before = queued.get("not_before")
        if not_before is None or parse_time(not_before) <= at:
            return queued
    return None


def _within_window(done: Completion | None, at: datetime) -> bool:
    """Whether a completion's duplicate window still holds at ``at``."""
    if done is None or not done.duplicate_until:
        return False
    return parse_time(done.duplicate_until) > at


def _lease_info(lease: dict[str, Any]) -> LeaseInfo:
    return LeaseInfo(
        lease["lease_id"],
        lease["holder"],
        lease["work_key"],
        lease["acquired_at"],
        lease["expires_at"],
    )


def _body(item: WorkItem) -> dict[str, Any]:
    return {"body": dict(item.body)} if item.body is not None else {}


def _queued_payload(queued: dict[str, Any]) -> dict[str, Any]:
    return {
        k: queued.get(k)
        for k in ("work_key", "source", "provider", "kind", "metadata", "cost_usd", "tokens")
    }


def __getattr__(name: str) -> Any:
    # The old name of PersonaRuntimeError, kept for one release.
    if name == "RuntimeError_":
        import warnings

        warnings.warn(
            "charter.runtime.engine.RuntimeError_ is deprecated; use PersonaRuntimeError",
            DeprecationWarning,
            stacklevel=2,
        )
        return PersonaRuntimeError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
