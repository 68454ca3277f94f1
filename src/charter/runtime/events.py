"""Event records of the ``persona.runtime.events`` topic and their kinds."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .clock import ensure_utc, format_time

TOPIC = "persona.runtime.events"


class Kind:
    """Event kinds (``update_kind`` in the supervision feed)."""

    TRIGGER_RECEIVED = "persona.trigger.received"
    SCHEDULE_FIRED = "persona.schedule.fired"
    LEASE_ACQUIRED = "persona.lease.acquired"
    LEASE_RENEWED = "persona.lease.renewed"
    LEASE_RELEASED = "persona.lease.released"
    LEASE_EXPIRED = "persona.lease.expired"
    LEASE_CONFLICT = "persona.lease.conflict"
    RUN_STARTED = "persona.run.started"
    RUN_RUNNING = "persona.run.running"
    RUN_COMPLETED = "persona.run.completed"
    RUN_FAILED = "persona.run.failed"
    RUN_DUPLICATE = "persona.run.duplicate"
    # a run waiting for an approval, out of its lease (serve) / taken up again
    RUN_PARKED = "persona.run.parked"
    RUN_UNPARKED = "persona.run.unparked"
    SPEND_RECORDED = "persona.spend.recorded"
    BUDGET_EXHAUSTED = "persona.budget.exhausted"
    WORK_QUEUED = "persona.work.queued"
    WORK_COALESCED = "persona.work.coalesced"
    WORK_DEQUEUED = "persona.work.dequeued"
    #: a webhook delivery offered to the persona, by the sender's delivery id (issue 31)
    DELIVERY_RECEIVED = "persona.delivery.received"
    #: the same delivery again (a redelivery): refused, nothing else recorded
    DELIVERY_DUPLICATE = "persona.delivery.duplicate"
    #: a run whose lease expired is offered again (attempt n of max_attempts)
    WORK_RETRIED = "persona.work.retried"
    DEAD_LETTERED = "persona.event.dead_lettered"
    PAUSED = "persona.paused"
    RESUMED = "persona.resumed"
    DRAIN_COMPLETED = "persona.drain.completed"
    DISABLED = "persona.disabled"
    ENABLED = "persona.enabled"
    HANDOFF_DISPATCHED = "persona.handoff.dispatched"
    HANDOFF_RECEIVED = "persona.handoff.received"
    HANDOFF_ACCEPTED = "persona.handoff.accepted"
    # a handoff sent to a remote agent (a2a://): its remote task, or why it failed
    HANDOFF_DELIVERED = "persona.handoff.delivered"
    HANDOFF_FAILED = "persona.handoff.failed"
    HUMAN_INBOX_CREATED = "persona.human_inbox.created"
    HUMAN_INBOX_ACKNOWLEDGED = "persona.human_inbox.acknowledged"


@dataclass(frozen=True)
class NewEvent:
    """An event to append; the log assigns ``event_id``."""

    persona: str
    kind: str
    occurred_at: datetime
    payload: dict[str, Any] = field(default_factory=dict)
    actor: str = "charter"
    persona_version: str | None = None

    def __post_init__(self) -> None:
        if not self.persona:
            raise ValueError("an event needs a persona")
        if not self.kind:
            raise ValueError("an event needs a kind")
        object.__setattr__(self, "occurred_at", ensure_utc(self.occurred_at))
        # Fail before the transaction if the payload cannot be stored.
        json.dumps(self.payload)


@dataclass(frozen=True)
class Event:
    """An appended event, as every reader sees it."""

    event_id: int
    topic: str
    persona: str
    kind: str
    occurred_at: datetime
    payload: dict[str, Any]
    actor: str
    persona_version: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "event_id": self.event_id,
            "topic": self.topic,
            "persona": self.persona,
            "persona_version": self.persona_version,
            "actor": self.actor,
            "kind": self.kind,
            "occurred_at": format_time(self.occurred_at),
            "payload": self.payload,
        }
