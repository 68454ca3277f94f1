"""The ``EventLog`` interface shared by the SQLite and PostgreSQL backends.

A log holds the append-only events of one topic plus per-persona status snapshots.
Writers work inside :meth:`EventLog.write`, an exclusive transaction serialised across
processes (SQLite ``BEGIN IMMEDIATE``; PostgreSQL a transaction-scoped advisory lock),
so ids are assigned in commit order and a reader never sees them go backwards.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from charter.errors import CharterError

from .events import TOPIC, Event, NewEvent


class EventLogError(CharterError, RuntimeError):
    """The state store cannot be opened or used (bad URL, unreachable server, bad file)."""


@dataclass(frozen=True)
class Snapshot:
    """A persona's projected status state as of ``event_id``."""

    persona: str
    event_id: int
    version: int
    state: dict[str, Any]


@dataclass(frozen=True)
class Completion:
    """The latest ``persona.run.completed`` event of one work key (the duplicate window
    is looked up from these rather than carried in a persona's state)."""

    work_key: str
    event_id: int
    run_id: str | None
    duplicate_until: str | None


@dataclass(frozen=True)
class Prefetch:
    """What a write transaction will read first: ``persona``'s snapshot of projection
    ``version`` and up to ``limit`` tail events, and the completions of ``work_keys``
    (see :meth:`EventLog.write`)."""

    persona: str
    version: int
    limit: int
    work_keys: tuple[str, ...] = ()
    #: read no snapshot, only the persona's events after this id (a state held in memory)
    after: int | None = None


#: the event kind whose rows the completion lookup reads (a partial index covers them)
COMPLETED_KIND = "persona.run.completed"
#: the event kind whose rows the delivery lookup reads (a partial index covers them)
DELIVERY_KIND = "persona.delivery.received"


class LogTransaction(ABC):
    """Operations available inside a transaction (exclusive for writers)."""

    @abstractmethod
    def last_event_id(self) -> int:
        """The highest event id of the topic (0 when empty)."""

    @abstractmethod
    def append(self, events: Sequence[NewEvent]) -> list[Event]:
        """Append atomically with the transaction; ids are consecutive."""

    @abstractmethod
    def read(
        self,
        *,
        after: int = 0,
        persona: str | None = None,
        limit: int | None = None,
        kinds: Collection[str] | None = None,
    ) -> list[Event]:
        """Events with ``event_id > after`` in id order, optionally for one persona and
        only of ``kinds``."""

    @abstractmethod
    def chains(self, *, after: int = 0, limit: int | None = None) -> list[tuple[int, str | None]]:
        """``(event_id, chain hash)`` in id order (``None`` for events older than the chain)."""

    @abstractmethod
    def chain_heads(self) -> dict[str, tuple[int, str]]:
        """Each persona chain's recorded head: ``{persona: (event id, link)}``."""

    @abstractmethod
    def link_before(self, persona: str, event_id: int) -> tuple[int, str | None] | None:
        """The id and chain link of ``persona``'s last event before ``event_id`` (``None``
        when it has none); an index descent."""

    @abstractmethod
    def load_snapshot(self, persona: str) -> Snapshot | None: ...

    @abstractmethod
    def completions(self, persona: str, work_keys: Sequence[str]) -> dict[str, Completion]:
        """The latest ``persona.run.completed`` of each of ``work_keys`` for ``persona``
        (keys that never completed are absent); an indexed lookup."""

    def deliveries(self, persona: str, delivery_ids: Sequence[str]) -> dict[str, int]:
        """The event id of the ``persona.delivery.received`` of each of ``delivery_ids``
        for ``persona`` (ids never received are absent). This default reads the persona's
        delivery events; the backends answer it from a partial index."""
        wanted = set(delivery_ids)
        found: dict[str, int] = {}
        if not wanted:
            return found
        for event in self.read(persona=persona, kinds=(DELIVERY_KIND,)):
            ident = event.payload.get("delivery_id")
            if ident in wanted and ident not in found:
                found[ident] = event.event_id
        return found

    def load_persona(
        self, persona: str, version: int, limit: int
    ) -> tuple[Snapshot | None, list[Event]]:
        """The persona's snapshot if it is of projection ``version`` (else ``None``), and
        up to ``limit`` of its events after it (after 0 without one). A backend may
        answer both in one round trip."""
        snapshot = self.load_snapshot(persona)
        if snapshot is not None and snapshot.version != version:
            snapshot = None
        after = snapshot.event_id if snapshot is not None else 0
        return snapshot, self.read(after=after, persona=persona, limit=limit)

    def persona_since(
        self, persona: str, version: int, after: int, limit: int
    ) -> tuple[int | None, list[Event]]:
        """For a state held in memory: where the persona's stored snapshot of projection
        ``version`` is (its event id, ``None`` without one; not its state) and up to
        ``limit`` of the persona's events after ``after``. A backend may answer both in
        one round trip."""
        return self.snapshot_at(persona, version), self.read(
            after=after, persona=persona, limit=limit
        )

    def snapshot_at(self, persona: str, version: int) -> int | None:
        """The event id of the persona's stored snapshot of projection ``version``."""
        snapshot = self.load_snapshot(persona)
        return snapshot.event_id if snapshot is not None and snapshot.version == version else None

    @abstractmethod
    def save_snapshot(self, snapshot: Snapshot) -> None: ...


class EventLog(ABC):
    """An append-only event log of one topic (default ``persona.runtime.events``)."""

    topic: str = TOPIC
    backend: str = "abstract"
    #: events up to this id carry the topic-wide chain of a log written before persona
    #: chains (0: none); later events are chained per persona (see charter.runtime.audit)
    chains_from: int = 0
    #: the topic-wide chain's link at :attr:`chains_from`, where every persona chain of a
    #: migrated log starts (``None``: they start empty)
    anchor: str | None = None
    #: write transactions committed through this log object (tests, benchmarks)
    commits: int = 0

    @abstractmethod
    def write(
        self, *, prefetch: Prefetch | Sequence[Prefetch] | None = None
    ) -> AbstractContextManager[LogTransaction]:
        """An exclusive write transaction; commits on normal exit, rolls back on error.

        ``prefetch``: what the transaction will first ask :meth:`LogTransaction.load_persona`
        (or ``persona_since``) and :meth:`LogTransaction.completions` for, one persona or
        several; a backend with round trips reads it together with taking the lock (SQLite
        has none to save and reads it when asked).
        """

    @abstractmethod
    def read_view(self) -> AbstractContextManager[LogTransaction]:
        """A read transaction (no append/save)."""

    #: the highest event id :meth:`wait_for_append` knew to be committed when it returned
    #: (every id up to it is readable)
    last_seen: int = 0
    #: the kinds of the events :meth:`wait_for_append` learnt of since it last returned
    #: (PostgreSQL's notify payloads carry them), or ``None`` when it cannot tell: a
    #: caller interested in some kinds only need not read when none of them is here
    kinds_seen: frozenset[str] | None = None

    @abstractmethod
    def wait_for_append(self, after_event_id: int, timeout: float) -> bool:
        """Block until the topic holds an event after ``after_event_id`` or ``timeout`` passes.

        Returns whether such an event exists (and sets :attr:`last_seen`). SQLite polls;
        PostgreSQL uses LISTEN/NOTIFY, whose payloads carry the committed last id.
        """

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def describe(self) -> str:
        """Where the state lives (a path or a URL without credentials)."""

    # Convenience wrappers -------------------------------------------------

    def append(self, events: Sequence[NewEvent]) -> list[Event]:
        if not events:
            return []
        with self.write() as txn:
            return txn.append(events)

    def read(
        self,
        *,
        after: int = 0,
        persona: str | None = None,
        limit: int | None = None,
        kinds: Collection[str] | None = None,
    ) -> list[Event]:
        with self.read_view() as txn:
            return txn.read(after=after, persona=persona, limit=limit, kinds=kinds)

    def last_event_id(self) -> int:
        with self.read_view() as txn:
            return txn.last_event_id()

    def load_persona(
        self, persona: str, version: int, limit: int
    ) -> tuple[Snapshot | None, list[Event]]:
        """:meth:`LogTransaction.load_persona` as of now (one consistent read)."""
        with self.read_view() as txn:
            return txn.load_persona(persona, version, limit)

    def persona_since(
        self, persona: str, version: int, after: int, limit: int
    ) -> tuple[int | None, list[Event]]:
        """:meth:`LogTransaction.persona_since` as of now (one consistent read)."""
        with self.read_view() as txn:
            return txn.persona_since(persona, version, after, limit)

    def iter_all(self, *, persona: str | None = None, page: int = 5000) -> Iterator[Event]:
        after = 0
        while True:
            batch = self.read(after=after, persona=persona, limit=page)
            yield from batch
            if len(batch) < page:
                return
            after = batch[-1].event_id

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_limit(limit: int | None) -> None:
    if limit is not None and limit < 0:
        raise ValueError("limit must be >= 0")
