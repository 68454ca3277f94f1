"""The supervision feed: ``persona.runtime.events`` as hosted persona/update frames."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from .clock import format_time
from .events import Event
from .log import EventLog

PERSONA_KIND = "persona"
_PAGE = 1000


def supervision_frame(event: Event) -> dict[str, Any]:
    return {
        "event_id": event.event_id,
        "persona_id": event.persona,
        "persona_kind": PERSONA_KIND,
        "persona_version": event.persona_version,
        "actor": event.actor,
        "update_kind": event.kind,
        "occurred_at": format_time(event.occurred_at),
        "payload": event.payload,
    }


def to_ndjson(frame: dict[str, Any]) -> str:
    return json.dumps(frame, separators=(",", ":"), sort_keys=False)


def tail(
    log: EventLog,
    *,
    persona: str | None = None,
    since_event_id: int = 0,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """Frames with ``event_id > since_event_id`` (strictly), oldest first."""
    return [
        supervision_frame(e) for e in log.read(after=since_event_id, persona=persona, limit=limit)
    ]


def follow(
    log: EventLog,
    *,
    persona: str | None = None,
    since_event_id: int = 0,
    limit: int | None = None,
    idle_timeout: float | None = None,
    wait_slice: float = 0.25,
    should_stop: Callable[[], bool] = lambda: False,
) -> Iterator[dict[str, Any]]:
    """Yield existing frames after the cursor, then new ones as they are appended.

    Stops after ``limit`` frames, after ``idle_timeout`` seconds without a new frame,
    or when ``should_stop()`` is true.
    """
    cursor = since_event_id
    emitted = 0
    last_new = time.monotonic()
    while True:
        with log.read_view() as txn:
            top = txn.last_event_id()
            page = _PAGE if limit is None else min(_PAGE, limit - emitted)
            events = txn.read(after=cursor, persona=persona, limit=page)
        for event in events:
            yield supervision_frame(event)
            emitted += 1
        if limit is not None and emitted >= limit:
            return
        if len(events) == page:
            cursor = events[-1].event_id
            continue
        cursor = max(cursor, top)
        if events:
            last_new = time.monotonic()
        if should_stop():
            return
        wait = wait_slice
        if idle_timeout is not None:
            remaining = idle_timeout - (time.monotonic() - last_new)
            if remaining <= 0:
                return
            wait = min(wait, remaining)
        log.wait_for_append(cursor, wait)
