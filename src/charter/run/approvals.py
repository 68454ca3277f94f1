"""Approvals for ``act_with_approval``: interactive on a TTY, otherwise durable in the log.

A durable approval is a ``persona.approval.requested`` event; ``charter approve RUN CALL``
or ``charter deny RUN CALL`` (any process) appends ``persona.approval.granted|denied``
while the run waits (heartbeating its lease). An approval never expires into an allow: a
wait that times out appends ``persona.approval.expired`` and the call is not executed.
"""

from __future__ import annotations

import getpass
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from charter.runtime import Batch, EventLog, PersonaRuntime, format_time, parse_time

from .errors import ApprovalError
from .events import APPROVAL_RESOLUTIONS, RunKind

POLL_SECONDS = 0.05

_STATUS_KIND = {
    "granted": RunKind.APPROVAL_GRANTED,
    "denied": RunKind.APPROVAL_DENIED,
    "expired": RunKind.APPROVAL_EXPIRED,
}
_KIND_STATUS = {v: k for k, v in _STATUS_KIND.items()}


@dataclass(frozen=True)
class ApprovalVerdict:
    status: str  # granted | denied | expired
    by: str | None
    reason: str | None
    receipt_id: str | None = None
    event_id: int | None = None

    @property
    def granted(self) -> bool:
        return self.status == "granted"

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "by": self.by,
            "reason": self.reason,
            "receipt_id": self.receipt_id,
            "event_id": self.event_id,
        }


class Approver(Protocol):
    """A local approval hook: ``(granted, by, reason)`` for one request."""

    mode: str

    def __call__(self, request: dict[str, Any]) -> tuple[bool, str, str | None]: ...


class InteractiveApprover:
    """Asks on the terminal (stderr), default no."""

    mode = "tty"

    def __call__(self, request: dict[str, Any]) -> tuple[bool, str, str | None]:
        import click

        click.echo(
            f"approval needed: {request['persona']} run {request['run_id']} wants to call "
            f"{request['tool']} ({request['side_effect_level']}) with {request['arguments']}",
            err=True,
        )
        ok = click.confirm("Approve this call?", default=False, err=True)
        return ok, f"tty:{getpass.getuser()}", None


class CallbackApprover:
    """Wraps ``fn(request) -> bool | (bool, reason)`` (tests, embedded hosts)."""

    mode = "callback"

    def __init__(self, fn: Callable[[dict[str, Any]], Any], *, by: str = "callback") -> None:
        self.fn = fn
        self.by = by

    def __call__(self, request: dict[str, Any]) -> tuple[bool, str, str | None]:
        out = self.fn(request)
        if isinstance(out, tuple):
            return bool(out[0]), self.by, (str(out[1]) if out[1] is not None else None)
        return bool(out), self.by, None


def approval_id(run_id: str, call_id: str) -> str:
    return f"{run_id}/{call_id}"


def _find_request(batch: Batch, run_id: str, call_id: str) -> tuple[Any, Any]:
    wanted = approval_id(run_id, call_id)
    request = None
    resolution = None
    for event in batch.txn.read(after=0):
        if event.payload.get("approval_id") != wanted:
            continue
        if event.kind == RunKind.APPROVAL_REQUESTED:
            request = event
        elif event.kind in APPROVAL_RESOLUTIONS:
            resolution = event
    return request, resolution


def resolve_approval(
    runtime: PersonaRuntime,
    run_id: str,
    call_id: str,
    *,
    status: str,
    at: datetime,
    by: str | None = None,
    reason: str | None = None,
    require_live: bool = True,
) -> dict[str, Any]:
    """Record the decision on a pending approval (one transaction; refuses double decisions).

    ``require_live``: refuse when the run no longer holds a live lease (nothing would
    resume; the CLI's ``approve``/``deny`` use it).
    """
    if status not in _STATUS_KIND:
        raise ValueError(f"unknown approval status {status!r}")

    def body(batch: Batch) -> dict[str, Any]:
        request, resolution = _find_request(batch, run_id, call_id)
        if request is None:
            raise ApprovalError(f"no approval was requested for run {run_id!r} call {call_id!r}")
        if resolution is not None:
            prior = _KIND_STATUS.get(resolution.kind, resolution.kind)
            who = resolution.payload.get("by")
            raise ApprovalError(
                f"approval {run_id} {call_id} was already {prior}" + (f" by {who}" if who else "")
            )
        persona = request.persona
        if require_live and request.payload.get("source") == "agent_loop":
            # an agent_loop waits in its own process, not under a runtime lease: it is
            # live until the deadline it declared (none: it waits until decided)
            deadline = request.payload.get("deadline")
            if deadline is not None and parse_time(deadline) <= batch.at:
                raise ApprovalError(
                    f"the agent loop waiting on {run_id} {call_id} gave up at {deadline}; "
                    "nothing would resume"
                )
        elif require_live:
            state = batch.state(persona)
            run = state.runs.get(run_id)
            lease = state.leases.get(run["lease_id"] or "") if run else None
            parked = run_id in state.parked  # a parked run resumes once decided
            if not parked and (lease is None or parse_time(lease["expires_at"]) <= batch.at):
                raise ApprovalError(
                    f"run {run_id} of {persona} is no longer running (finished or its lease "
                    "expired); nothing would resume"
                )
        payload = {
            "run_id": run_id,
            "call_id": call_id,
            "approval_id": approval_id(run_id, call_id),
            "tool": request.payload.get("tool"),
            "status": status,
            "by": by,
            "reason": reason,
            "receipt_id": batch.new_id("receipt"),
        }
        event = batch.emit(persona, _STATUS_KIND[status], payload)
        return {
            "persona": persona,
            "event_id": event.event_id,
            "at": format_time(batch.at),
            **payload,
        }

    return runtime.transact(at, body)


def pending_approvals(log: EventLog, *, persona: str | None = None) -> list[dict[str, Any]]:
    """Approval requests without a decision, oldest first."""
    requests: dict[str, dict[str, Any]] = {}
    for event in log.iter_all(persona=persona):
        aid = event.payload.get("approval_id")
        if not aid:
            continue
        if event.kind == RunKind.APPROVAL_REQUESTED:
            requests[aid] = {
                "persona": event.persona,
                "event_id": event.event_id,
                "requested_at": format_time(event.occurred_at),
                **{
                    k: event.payload.get(k)
                    for k in (
                        "run_id",
                        "call_id",
                        "approval_id",
                        "tool",
                        "arguments",
                        "side_effect_level",
                        "stage",
                    )
                },
            }
        elif event.kind in APPROVAL_RESOLUTIONS:
            requests.pop(aid, None)
    return list(requests.values())


def requested(log: EventLog, persona: str, approval: str) -> bool:
    """Was ``approval`` requested (by an earlier attempt of a parked run)?"""
    return any(
        e.kind == RunKind.APPROVAL_REQUESTED and e.payload.get("approval_id") == approval
        for e in log.iter_all(persona=persona)
    )


def decided(log: EventLog, persona: str, approval: str) -> ApprovalVerdict | None:
    """The decision on ``approval`` if one is in the log (no waiting)."""
    return wait_for_resolution(log, persona, approval, after_event_id=0, timeout=0)


def wait_for_resolution(
    log: EventLog,
    persona: str,
    approval: str,
    *,
    after_event_id: int,
    timeout: float | None,
    on_idle: Callable[[], None] = lambda: None,
    poll: float = POLL_SECONDS,
) -> ApprovalVerdict | None:
    """Block until ``approval`` is decided in the log; ``None`` when ``timeout`` passes."""
    cursor = after_event_id
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        for event in log.read(after=cursor, persona=persona):
            cursor = event.event_id
            if event.kind in APPROVAL_RESOLUTIONS and event.payload.get("approval_id") == approval:
                return ApprovalVerdict(
                    _KIND_STATUS[event.kind],
                    event.payload.get("by"),
                    event.payload.get("reason"),
                    event.payload.get("receipt_id"),
                    event.event_id,
                )
        if deadline is not None and time.monotonic() >= deadline:
            return None
        on_idle()
        wait = poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic()))
        if log.backend == "sqlite":
            time.sleep(wait)
        else:
            log.wait_for_append(log.last_event_id(), wait)


__all__ = [
    "ApprovalVerdict",
    "Approver",
    "CallbackApprover",
    "InteractiveApprover",
    "approval_id",
    "decided",
    "pending_approvals",
    "requested",
    "resolve_approval",
    "wait_for_resolution",
]
