"""Status maintained incrementally: a per-persona snapshot plus the tail of the log.

Writers going through :class:`~charter.runtime.engine.PersonaRuntime` save a new
snapshot in the same transaction as their events once the tail after the stored one
reaches :data:`SNAPSHOT_EVERY` events, so ``status`` reads one row and a short tail.
(Saving it on every write cost a whole persona state, its queue and the duplicate
window's keys, encoded, sent and stored under the log's lock per transaction; a tail of
a few small events costs far less to fold.) Events appended by other means only lengthen
the tail; a read that finds a tail longer than ``compact_after`` saves a fresh snapshot.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from .events import Event
from .log import EventLog, LogTransaction, Prefetch, Snapshot
from .state import PROJECTION_VERSION, PersonaState, apply

COMPACT_AFTER = 256
#: a writer saves a persona's snapshot when the tail after the stored one reaches this
#: (or :func:`snapshot_every`'s more for a long queue)
SNAPSHOT_EVERY = 32
_PAGE = 10_000


def snapshot_every(state: PersonaState) -> int:
    """How long a tail a writer lets follow the stored snapshot of ``state``.

    Saving a snapshot encodes and stores every entry of the state; folding an event costs
    about one. A state with a long queue (a backlog) is saved after proportionally more
    events, so saving costs about the same per event whatever the backlog (at 100
    webhooks a second past what one replica could run, encoding snapshots of a 500-deep
    queue every 32 events took a fifth of its time)."""
    return max(SNAPSHOT_EVERY, (len(state.queue) + len(state.parked) + len(state.inbox)) // 4)


def load_state(
    txn: LogTransaction | EventLog, persona: str, cache: StateCache | None = None
) -> tuple[PersonaState, int]:
    """The persona's state as of the transaction (or of now, read from a log), and how
    many events follow the stored snapshot (at most: another writer may have saved a
    newer one). From ``cache``: a fork of the state held, with the events after it."""
    held = cache.get(persona) if cache is not None else None
    if held is not None:
        base, tail = held
        stored, events = txn.persona_since(persona, PROJECTION_VERSION, base.last_event_id, _PAGE)
        if len(events) < _PAGE:
            state = base.fork()
            for event in events:
                apply(state, event)
            if stored is not None and stored > base.last_event_id:
                # another writer (a thread's runtime, a replica) saved one since: counting
                # on from the held tail, every runtime saved its own every 32 events
                return state, sum(1 for event in events if event.event_id > stored)
            return state, tail + len(events)
        # far behind (another host wrote a page since): the stored snapshot is shorter
    snapshot, tail_events = txn.load_persona(persona, PROJECTION_VERSION, _PAGE)
    # a snapshot just decoded is for us alone: adopted without a copy
    state = PersonaState(persona) if snapshot is None else PersonaState.adopt(snapshot.state)
    folded = 0
    while True:
        for event in tail_events:
            apply(state, event)
        folded += len(tail_events)
        if len(tail_events) < _PAGE:
            return state, folded
        tail_events = txn.read(after=tail_events[-1].event_id, persona=persona, limit=_PAGE)


class StateCache:
    """Persona states this runtime read or wrote, each with the count of events after
    the stored snapshot. A later read folds only the persona's events after the state's
    ``last_event_id`` into a fork of it, instead of decoding the stored snapshot, whose
    size grows with the queue. Entries are never changed in place (every reader and
    writer gets a :meth:`PersonaState.fork`), so threads may share a cache."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, tuple[PersonaState, int]] = {}

    def get(self, persona: str) -> tuple[PersonaState, int] | None:
        with self._lock:
            return self._held.get(persona)

    def put(self, persona: str, state: PersonaState, tail: int) -> None:
        """Hold ``state`` (the caller gives it up: it must not change it any more)."""
        with self._lock:
            held = self._held.get(persona)
            if held is None or held[0].last_event_id <= state.last_event_id:
                self._held[persona] = (state, tail)

    def clear(self) -> None:
        """Forget every state held (the database went away: it may come back as a
        replica that lost the last commits, and a state held past its log would be
        folded on from events that no longer exist)."""
        with self._lock:
            self._held.clear()

    def after(self, persona: str) -> int | None:
        """The id a read of ``persona`` starts after, when a state is held."""
        held = self.get(persona)
        return None if held is None else held[0].last_event_id


def prefetch(
    persona: str, work_keys: Sequence[str] = (), cache: StateCache | None = None
) -> Prefetch:
    """What :func:`load_state` asks the log for first, with the completions of
    ``work_keys`` (``EventLog.write(prefetch=...)``)."""
    after = cache.after(persona) if cache is not None else None
    return Prefetch(persona, PROJECTION_VERSION, _PAGE, tuple(work_keys), after)


def save_state(txn: LogTransaction, state: PersonaState) -> None:
    """Store ``state`` as the snapshot at the topic's current last event id."""
    txn.save_snapshot(
        # serialised by save_snapshot before anything can change it: no deep copy
        Snapshot(state.persona, txn.last_event_id(), PROJECTION_VERSION, state.shallow_dict())
    )


def fold(state: PersonaState, events: list[Event]) -> None:
    for event in events:
        if event.persona == state.persona:
            apply(state, event)


class StatusProjection:
    """Reads a persona's projected state from a log, compacting long tails."""

    def __init__(
        self,
        log: EventLog,
        *,
        compact_after: int = COMPACT_AFTER,
        cache: StateCache | None = None,
    ) -> None:
        self.log = log
        self.compact_after = compact_after
        self.cache = cache if cache is not None else StateCache()

    def state(self, persona: str) -> PersonaState:
        """The persona's state now; the caller may keep and change it (a fork)."""
        # the held state and the events after it, or the snapshot and its tail, in one
        # read (a tail longer than a page is read on after it: the log is append-only,
        # so that is the state of a later moment)
        state, folded = load_state(self.log, persona, self.cache)
        if folded > max(self.compact_after, 2 * snapshot_every(state)):
            return self.refresh(persona)
        self.cache.put(persona, state, folded)
        return state.fork()

    def refresh(self, persona: str) -> PersonaState:
        """Fold the tail and save a snapshot (takes the write lock)."""
        with self.log.write() as txn:
            state, _ = load_state(txn, persona, self.cache)
            save_state(txn, state)
        self.cache.put(persona, state, 0)
        return state.fork()

    def rebuild(self, persona: str) -> PersonaState:
        """Full replay from event 0, ignoring snapshots (for checks and repair)."""
        state = PersonaState(persona)
        for event in self.log.iter_all(persona=persona):
            apply(state, event)
        return state
