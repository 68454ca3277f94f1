"""The human inbox: ``human:GROUP`` handoffs as items a person sees and acknowledges.

A handoff routed to ``human:maintainers`` appends ``persona.human_inbox.created`` (the
handoff, its payload and the dispatch that caused it) in the same transaction as the
dispatch; ``charter inbox ack`` (or the console) appends
``persona.human_inbox.acknowledged``. The inbox is the fold of those two kinds; both are
in the supervision feed like every event.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from .engine import Batch, PersonaRuntime, PersonaRuntimeError
from .events import Event, Kind
from .log import EventLog


class InboxError(PersonaRuntimeError):
    """An inbox request that cannot be honoured (unknown item, already acknowledged)."""


def fold(events: Iterable[Event]) -> dict[str, dict[str, Any]]:
    """Inbox items by id, in creation order (acknowledged ones carry ``acknowledged``)."""
    items: dict[str, dict[str, Any]] = {}
    for event in events:
        p = event.payload
        if event.kind == Kind.HUMAN_INBOX_CREATED:
            items[str(p["item_id"])] = {
                **p,
                "persona": event.persona,
                "created_at": event.occurred_at.isoformat().replace("+00:00", "Z"),
                "event_id": event.event_id,
                "acknowledged": None,
            }
        elif event.kind == Kind.HUMAN_INBOX_ACKNOWLEDGED:
            item = items.get(str(p.get("item_id")))
            if item is not None:
                item["acknowledged"] = {
                    "by": p.get("by"),
                    "note": p.get("note"),
                    "at": event.occurred_at.isoformat().replace("+00:00", "Z"),
                    "event_id": event.event_id,
                }
    return items


def items(
    log: EventLog, *, group: str | None = None, include_acknowledged: bool = False
) -> list[dict[str, Any]]:
    """Open (or all) inbox items, oldest first, optionally for one ``human:`` group."""
    out = []
    for item in fold(log.iter_all()).values():
        if group is not None and item.get("group") != group:
            continue
        if item["acknowledged"] is None or include_acknowledged:
            out.append(item)
    return out


def get(log: EventLog, item_id: str) -> dict[str, Any]:
    found = fold(log.iter_all()).get(item_id)
    if found is None:
        raise InboxError(f"no inbox item {item_id!r} (charter inbox list shows them)")
    return found


def acknowledge(
    runtime: PersonaRuntime,
    item_id: str,
    *,
    at: datetime,
    by: str | None = None,
    note: str | None = None,
) -> dict[str, Any]:
    """Append ``persona.human_inbox.acknowledged``; a second acknowledgement is refused."""

    def body(batch: Batch) -> dict[str, Any]:
        item = fold(batch.txn.read()).get(item_id)
        if item is None:
            raise InboxError(f"no inbox item {item_id!r} (charter inbox list shows them)")
        if item["acknowledged"] is not None:
            done = item["acknowledged"]
            raise InboxError(
                f"inbox item {item_id} was already acknowledged by {done['by']} at {done['at']}"
            )
        payload = {"item_id": item_id, "handoff_id": item.get("handoff_id"), "by": by,
                   "note": note}  # fmt: skip
        event = batch.emit(item["persona"], Kind.HUMAN_INBOX_ACKNOWLEDGED, payload)
        return {**payload, "event_id": event.event_id, "persona": item["persona"]}

    return runtime.transact(at, body)


__all__ = ["InboxError", "acknowledge", "fold", "get", "items"]
