"""Tamper evidence: a hash chain over the event log, and its verification.

Every event appended by either backend stores ``chain = sha256(previous chain + the
event's canonical form)`` in the same transaction, the canonical form being the JSON of
``[event_id, topic, persona, persona_version, actor, kind, occurred_at, payload]`` with
sorted keys (what both backends read back unchanged). :func:`verify` recomputes the
chain from event 1: an edited row breaks its own link, a deleted row leaves a gap in the
ids, reordered rows break the links that follow, and a removed tail no longer reaches the
topic's recorded last id. Events written before the chain existed are reported as
unchained, and the chain starts after them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .clock import format_time
from .events import Event
from .log import EventLog

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

GENESIS = ""
_PAGE = 5000


def canonical(event: Event) -> bytes:
    return json.dumps(
        [
            event.event_id,
            event.topic,
            event.persona,
            event.persona_version,
            event.actor,
            event.kind,
            format_time(event.occurred_at),
            event.payload,
        ],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode()


def chain_hash(previous: str | None, event: Event) -> str:
    """The link of ``event`` after ``previous`` (``None``/``""``: the chain starts here)."""
    return hashlib.sha256((previous or GENESIS).encode() + b"\n" + canonical(event)).hexdigest()


@dataclass
class ChainReport:
    """What :func:`verify` found (``ok`` only when every chained event links)."""

    events: int = 0
    chained: int = 0
    unchained: int = 0
    last_event_id: int = 0
    recorded_last_event_id: int = 0
    head: str | None = None
    problems: list[dict[str, Any]] = field(default_factory=list)
    signatures: dict[str, Any] | None = None  # with a key: the checkpoints' report

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def first_bad_event_id(self) -> int | None:
        return self.problems[0]["event_id"] if self.problems else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "events": self.events,
            "chained": self.chained,
            "unchained": self.unchained,
            "last_event_id": self.last_event_id,
            "recorded_last_event_id": self.recorded_last_event_id,
            "head": self.head,
            "first_bad_event_id": self.first_bad_event_id,
            "problems": self.problems[:20],
            "signatures": self.signatures,
        }


def _rows(log: EventLog) -> Iterator[tuple[Event, str | None]]:
    after = 0
    while True:
        with log.read_view() as txn:
            events = txn.read(after=after, limit=_PAGE)
            chains = dict(txn.chains(after=after, limit=_PAGE))
        for event in events:
            yield event, chains.get(event.event_id)
        if len(events) < _PAGE:
            return
        after = events[-1].event_id


def verify(log: EventLog, *, key: Ed25519PublicKey | None = None) -> ChainReport:
    """Recompute the chain over the whole log (one pass, paged).

    With ``key``, also check the signed checkpoints (:mod:`charter.runtime.signing`):
    each must carry a valid signature by ``key`` over the head the log really has at
    the signed event, and at least one must exist.
    """
    from .signing import AUDIT_PERSONA, CHECKPOINT_KIND, verify_checkpoints

    report = ChainReport(recorded_last_event_id=log.last_event_id())
    checkpoints: list[tuple[int, dict[str, Any]]] = []
    if key is not None:
        checkpoints = [
            (e.event_id, dict(e.payload))
            for e in log.iter_all(persona=AUDIT_PERSONA)
            if e.kind == CHECKPOINT_KIND
        ]
    signed_ids = {int(p.get("event_id") or 0) for _, p in checkpoints}
    heads: dict[int, str | None] = {}
    previous: str | None = None
    expected_id = 1
    for event, stored in _rows(log):
        if event.event_id in signed_ids:
            heads[event.event_id] = stored
        report.events += 1
        if event.event_id != expected_id:
            report.problems.append(
                {"event_id": expected_id, "problem": f"events {expected_id}..{event.event_id - 1} "
                 "are missing (deleted rows)"}
            )  # fmt: skip
        expected_id = event.event_id + 1
        report.last_event_id = event.event_id
        if stored is None:
            if report.chained:
                report.problems.append(
                    {"event_id": event.event_id, "problem": "chain hash removed"}
                )
            report.unchained += 1
            previous = None
            continue
        report.chained += 1
        want = chain_hash(previous, event)
        if stored != want:
            report.problems.append(
                {
                    "event_id": event.event_id,
                    "problem": "content or order does not match its chain hash "
                    "(edited, reordered or inserted)",
                    "kind": event.kind,
                    "persona": event.persona,
                }
            )
        previous = stored
    report.head = previous
    if report.recorded_last_event_id > report.last_event_id:
        report.problems.append(
            {
                "event_id": report.last_event_id + 1,
                "problem": f"the log ends at event {report.last_event_id} but recorded "
                f"{report.recorded_last_event_id} (the tail was removed)",
            }
        )
    if key is not None:
        signed = verify_checkpoints(heads, checkpoints, key, log.topic)
        report.signatures = signed.to_dict()
        report.problems.extend(signed.problems)
    return report


def chain_status(log: EventLog, event_ids: list[int]) -> str | None:
    """The chain status of some events (a run's): each one's link to its predecessor.

    ``"intact (N events)"``, ``"broken at event K"``, or ``None`` when none of them is
    chained (a log written before the chain).
    """
    if not event_ids:
        return None
    wanted = set(event_ids)
    low, high = min(wanted), max(wanted)
    with log.read_view() as txn:
        events = {e.event_id: e for e in txn.read(after=low - 1, limit=high - low + 1)}
        chains = dict(txn.chains(after=max(0, low - 2), limit=high - low + 2))
    checked = 0
    for event_id in sorted(wanted):
        stored = chains.get(event_id)
        event = events.get(event_id)
        if stored is None or event is None:
            if checked or any(chains.get(i) for i in wanted):
                return f"broken at event {event_id} (missing or unchained)"
            continue
        previous = chains.get(event_id - 1) if event_id > 1 else None
        if chain_hash(previous, event) != stored:
            return f"broken at event {event_id} (run charter audit verify)"
        checked += 1
    return f"intact ({checked} events)" if checked else None


def export(log: EventLog, *, after: int = 0) -> Iterator[dict[str, Any]]:
    """Every event with its chain hash, for an external copy (NDJSON-ready dicts)."""
    for event, stored in _rows(log):
        if event.event_id > after:
            yield {**event.to_dict(), "chain": stored}


__all__ = ["ChainReport", "canonical", "chain_hash", "chain_status", "export", "verify"]
