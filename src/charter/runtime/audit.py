"""Tamper evidence: hash chains over the event log, and their verification.

Every event appended by either backend stores, in the same transaction, ``chain =
sha256(previous link + "\\n" + the event's canonical form)``, the canonical form being the
JSON of ``[event_id, topic, persona, persona_version, actor, kind, occurred_at,
payload]`` with sorted keys (what both backends read back unchanged). Each persona has
its own chain (issue 36): the previous link is that of the persona's previous event, so
writes for different personas never need each other's rows; each chain's head (its last
event id and link) is recorded with the rows (``chain_heads``). A log written before
persona chains keeps its topic-wide chain (each link covering the topic's previous event)
up to :attr:`~charter.runtime.log.EventLog.chains_from`, and every persona chain starts
from that chain's head, the log's ``anchor``.

:func:`verify` recomputes every chain in one pass from event 1: an edited row breaks its
own link, a deleted row leaves a gap in the ids and breaks its persona's next link,
reordered rows break the links that follow, and a removed tail no longer reaches the
topic's recorded last id or its persona's recorded head. Events written before any chain
existed are reported as unchained. :func:`heads_root` is the Merkle root over every
chain's head, what a signed checkpoint signs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
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


def heads_root(heads: Mapping[str, tuple[int, str]], legacy: tuple[int, str] | None) -> str:
    """The Merkle root of the chains' heads: a leaf per persona ``[persona, event id,
    link]`` in persona order, plus ``["", id, link]`` for a migrated log's topic-wide
    chain (``legacy``); a node hashes its two children (an odd one out moves up as is).
    Leaves and nodes are prefixed differently (0 and 1) so that neither passes for the
    other."""
    entries = sorted((p, i, link) for p, (i, link) in heads.items())
    if legacy is not None:
        entries.insert(0, ("", legacy[0], legacy[1]))
    level = [
        hashlib.sha256(b"\x00" + json.dumps(list(e), separators=(",", ":")).encode()).digest()
        for e in entries
    ]
    if not level:
        return hashlib.sha256(b"").hexdigest()
    while len(level) > 1:
        paired = [
            hashlib.sha256(b"\x01" + level[i] + level[i + 1]).digest()
            for i in range(0, len(level) - 1, 2)
        ]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0].hex()


def legacy_head(log: EventLog) -> tuple[int, str] | None:
    """A migrated log's topic-wide chain head (``None`` for a log born with persona
    chains, or one whose older events were never chained)."""
    if log.chains_from and log.anchor:
        return log.chains_from, log.anchor
    return None


@dataclass
class ChainReport:
    """What :func:`verify` found (``ok`` only when every chained event links)."""

    events: int = 0
    chained: int = 0
    unchained: int = 0
    last_event_id: int = 0
    recorded_last_event_id: int = 0
    head: str | None = None  # the Merkle root of every chain's head (heads_root)
    chains: int = 0  # persona chains
    legacy_through: int = 0  # events up to here carry the topic-wide chain (a migrated log)
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
            "chains": self.chains,
            "legacy_through": self.legacy_through,
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
    """Recompute every chain over the whole log (one pass, paged).

    With ``key``, also check the signed checkpoints (:mod:`charter.runtime.signing`):
    each must carry a valid signature by ``key`` over the heads the log really has at
    the signed event, and at least one must exist.
    """
    from .signing import AUDIT_PERSONA, CHECKPOINT_KIND, verify_checkpoints

    with log.read_view() as txn:  # one snapshot: the last id and the heads agree
        recorded_last = txn.last_event_id()
        recorded_heads = txn.chain_heads()
    report = ChainReport(recorded_last_event_id=recorded_last, legacy_through=log.chains_from)
    checkpoints: list[tuple[int, dict[str, Any]]] = []
    if key is not None:
        checkpoints = [
            (e.event_id, dict(e.payload))
            for e in log.iter_all(persona=AUDIT_PERSONA)
            if e.kind == CHECKPOINT_KIND
        ]
    signed_ids = {int(p.get("event_id") or 0) for _, p in checkpoints}
    links: dict[int, str | None] = {}  # the link at each signed id (v1 checkpoints)
    roots: dict[int, str] = {}  # the heads' root at each signed id (v2 checkpoints)
    legacy = legacy_head(log)
    start = log.anchor or ""
    heads: dict[str, tuple[int, str]] = {}  # recomputed, per persona
    at_recorded: dict[str, tuple[int, str]] = {}  # as of the recorded last id
    previous: str | None = None
    expected_id = 1
    for event, stored in _rows(log):
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
        else:
            report.chained += 1
            if event.event_id <= log.chains_from:  # the topic-wide chain of a migrated log
                want = chain_hash(previous, event)
                previous = stored
                if event.event_id == log.chains_from and stored != start:
                    report.problems.append(
                        {"event_id": event.event_id, "problem": "the persona chains' anchor "
                         "does not match the log's head here (history before it was rewritten)"}
                    )  # fmt: skip
            else:
                found = heads.get(event.persona)
                want = chain_hash(found[1] if found else start, event)
                heads[event.persona] = (event.event_id, stored)
                if event.event_id <= recorded_last:
                    at_recorded[event.persona] = heads[event.persona]
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
        if event.event_id in signed_ids:
            links[event.event_id] = stored
            roots[event.event_id] = heads_root(heads, legacy)
    report.chains = len(heads)
    report.head = heads_root(heads, legacy) if (heads or legacy) else previous
    if report.recorded_last_event_id > report.last_event_id:
        report.problems.append(
            {
                "event_id": report.last_event_id + 1,
                "problem": f"the log ends at event {report.last_event_id} but recorded "
                f"{report.recorded_last_event_id} (the tail was removed)",
            }
        )
    for persona in sorted(recorded_heads.keys() | at_recorded.keys()):
        have, want_head = at_recorded.get(persona), recorded_heads.get(persona)
        if have != want_head:
            reached = have[0] if have else "none"
            recorded = want_head[0] if want_head else "none"
            report.problems.append(
                {
                    "event_id": (have or want_head or (0, ""))[0],
                    "problem": f"persona {persona!r}'s chain ends at event {reached} but its "
                    f"recorded head is event {recorded} (its tail was removed or its head "
                    "rewritten)",
                }
            )
    report.problems.sort(key=lambda p: int(p["event_id"]))
    if key is not None:
        signed = verify_checkpoints(links, checkpoints, key, log.topic, roots=roots)
        report.signatures = signed.to_dict()
        report.problems.extend(signed.problems)
    return report


def chain_status(log: EventLog, event_ids: list[int]) -> str | None:
    """The chain status of some events (a run's): each one's link to its predecessor
    (its persona's previous event, or the topic's previous event before persona chains).

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
            if event_id <= log.chains_from:
                previous = chains.get(event_id - 1) if event_id > 1 else None
            else:
                before = txn.link_before(event.persona, event_id)
                in_chain = before is not None and before[0] > log.chains_from
                previous = before[1] if before is not None and in_chain else log.anchor
            if chain_hash(previous, event) != stored:
                return f"broken at event {event_id} (run charter audit verify)"
            checked += 1
    return f"intact ({checked} events)" if checked else None


def export(log: EventLog, *, after: int = 0) -> Iterator[dict[str, Any]]:
    """Every event with its chain hash, for an external copy (NDJSON-ready dicts)."""
    for event, stored in _rows(log):
        if event.event_id > after:
            yield {**event.to_dict(), "chain": stored}


__all__ = [
    "ChainReport",
    "canonical",
    "chain_hash",
    "chain_status",
    "export",
    "heads_root",
    "legacy_head",
    "verify",
]
