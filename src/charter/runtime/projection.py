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

from collections.abc import Sequence

from .events import Event
from .log import EventLog, LogTransaction, Prefetch, Snapshot
from .state import PROJECTION_VERSION, PersonaState, apply

COMPACT_AFTER = 256
#: a writer saves a persona's snapshot when the tail after the stored one reaches this
SNAPSHOT_EVERY = 32
_PAGE = 10_000


def load_state(txn: LogTransaction | EventLog, persona: str) -> tuple[PersonaState, int]:
    """The persona's state as of the transaction (or of now, read from a log), and how
    many tail events were folded."""
    snapshot, tail = txn.load_persona(persona, PROJECTION_VERSION, _PAGE)
    # a snapshot just decoded is for us alone: adopted without a copy
    state = PersonaState(persona) if snapshot is None else PersonaState.adopt(snapshot.state)
    folded = 0
    while True:
        for event in tail:
            apply(state, event)
        folded += len(tail)
        if len(tail) < _PAGE:
            return state, folded
        tail = txn.read(after=tail[-1].event_id, persona=persona, limit=_PAGE)


def prefetch(persona: str, work_keys: Sequence[str] = ()) -> Prefetch:
    """What :func:`load_state` asks the log for first, with the completions of
    ``work_keys`` (``EventLog.write(prefetch=...)``)."""
    return Prefetch(persona, PROJECTION_VERSION, _PAGE, tuple(work_keys))


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

    def __init__(self, log: EventLog, *, compact_after: int = COMPACT_AFTER) -> None:
        self.log = log
        self.compact_after = compact_after

    def state(self, persona: str) -> PersonaState:
        # the snapshot and its tail in one read (a tail longer than a page is read on
        # after it: the log is append-only, so that is the state of a later moment)
        state, folded = load_state(self.log, persona)
        if folded > self.compact_after:
            self.refresh(persona)
        return state

    def refresh(self, persona: str) -> PersonaState:
        """Fold the tail and save a snapshot (takes the write lock)."""
        with self.log.write() as txn:
            state, _ = load_state(txn, persona)
            save_state(txn, state)
        return state

    def rebuild(self, persona: str) -> PersonaState:
        """Full replay from event 0, ignoring snapshots (for checks and repair)."""
        state = PersonaState(persona)
        for event in self.log.iter_all(persona=persona):
            apply(state, event)
        return state
