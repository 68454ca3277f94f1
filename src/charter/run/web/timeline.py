"""A run's timeline from its events and its run record: stages, model calls, tool calls.

Approvals span from the request to the answer (and who gave it). Tool calls come from the
record's ``tool_calls`` (every call the run made, read-only ones
included, each with ``started_at``/``ended_at``: :mod:`charter.run.autonomy`); model calls
pair each ``persona.budget.reserved`` (the request) with the ``persona.usage.recorded`` or
``persona.model.fallback`` that ends it; a stage spans its calls. Each tool call is
coloured by its decision: allowed, denied (with the rule), asked (and who answered).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from charter.runtime import Event, Kind, parse_time

from ..events import APPROVAL_RESOLUTIONS, RunKind

MODEL_ENDS = (RunKind.USAGE_RECORDED, RunKind.MODEL_FALLBACK)


def _decision_of(call: dict[str, Any]) -> tuple[str, str]:
    """``(class, words)``: how the call was decided, for the bar's colour and its hover."""
    decision = call.get("decision") if isinstance(call.get("decision"), dict) else {}
    approval = call.get("approval") if isinstance(call.get("approval"), dict) else None
    status = str(call.get("status") or "")
    if decision and decision.get("decision") == "deny":
        rule = decision.get("rule")
        why = decision.get("reason") or "denied"
        return "denied", f"denied: {why}" + (f" (rule {rule})" if rule else "")
    if status.startswith("approval_"):
        by = (approval or {}).get("by")
        return "refused", f"asked: {status.removeprefix('approval_')}" + (f" by {by}" if by else "")
    if approval is not None:
        return "asked", f"asked: approved by {approval.get('by') or 'unknown'}"
    if status in ("dry_run", "proposed", "replayed"):
        return "dryrun", status.replace("_", " ")
    return "allowed", "allowed"


def build(events: Sequence[Event], record: dict[str, Any] | None) -> dict[str, Any]:
    """The timeline's spans (seconds from the run's start) and its duration."""
    run_id = record.get("run_id") if record else None
    start: datetime | None = None
    end: datetime | None = None
    for event in events:
        if event.kind == Kind.RUN_STARTED and start is None:
            start = event.occurred_at
        if event.kind in (Kind.RUN_COMPLETED, Kind.RUN_FAILED):
            end = event.occurred_at
    if start is None and events:
        start = events[0].occurred_at
    calls = [c for c in (record or {}).get("tool_calls") or [] if c.get("started_at")]
    if start is None and calls:
        start = parse_time(calls[0]["started_at"])
    if start is None:
        return {"run_id": run_id, "started_at": None, "duration_s": 0.0, "spans": []}
    origin = start

    def secs(at: datetime) -> float:
        return round((at - origin).total_seconds(), 6)

    tools: list[dict[str, Any]] = []
    for call in calls:
        cls, words = _decision_of(call)
        decision = call.get("decision") if isinstance(call.get("decision"), dict) else {}
        a, b = (
            parse_time(call["started_at"]),
            parse_time(call.get("ended_at") or call["started_at"]),
        )
        tools.append(
            {
                "kind": "tool",
                "key": str(call.get("call_id")),
                "label": str(call.get("tool")),
                "cls": cls,
                "decision": cls,
                "rule": decision.get("rule") if decision else None,
                "approved_by": (call.get("approval") or {}).get("by"),
                "stage": call.get("stage"),
                "status": call.get("status"),
                "start": secs(a),
                "end": secs(b),
                "title": f"{call.get('tool')} ({call.get('call_id')}): {words}; "
                f"status {call.get('status')}",
            }
        )
    models: list[dict[str, Any]] = []
    open_at: datetime | None = None
    for event in events:
        if event.kind == RunKind.BUDGET_RESERVED:
            open_at = event.occurred_at
        elif event.kind in MODEL_ENDS and open_at is not None:
            p = event.payload
            model = p.get("model") or "model"
            failed = event.kind == RunKind.MODEL_FALLBACK
            models.append(
                {
                    "kind": "model",
                    "key": f"model_{len(models) + 1}",
                    "label": str(model),
                    "cls": "model-failed" if failed else "model",
                    "start": secs(open_at),
                    "end": secs(event.occurred_at),
                    "tokens": int(p.get("input_tokens") or 0) + int(p.get("output_tokens") or 0),
                    "cost_usd": p.get("cost_usd"),
                    "title": f"{model}: "
                    + (
                        f"failed, fell back to {p.get('fallback')}"
                        if failed
                        else f"{p.get('input_tokens')} in / {p.get('output_tokens')} out tokens, "
                        f"${p.get('cost_usd')}"
                    ),
                }
            )
            open_at = None
    # each approval the run asked for: from the request to the person's answer (a parked
    # run waits here without a lease; the bar shows how long and who answered)
    asked: dict[str, tuple[datetime, dict[str, Any]]] = {}
    approvals: list[dict[str, Any]] = []
    for event in events:
        aid = event.payload.get("approval_id")
        if not aid:
            continue
        if event.kind == RunKind.APPROVAL_REQUESTED:
            asked[aid] = (event.occurred_at, event.payload)
        elif event.kind in APPROVAL_RESOLUTIONS and aid in asked:
            at, request = asked.pop(aid)
            status = event.kind.rsplit(".", 1)[1]
            by = event.payload.get("by")
            approvals.append(
                {
                    "kind": "approval",
                    "key": f"approval_{request.get('call_id')}",
                    "label": f"approval {request.get('tool')}",
                    "cls": "asked" if status == "granted" else "refused",
                    "start": secs(at),
                    "end": secs(event.occurred_at),
                    "approved_by": by,
                    "title": f"asked for {request.get('tool')} ({request.get('call_id')}): "
                    f"{status} by {by or 'unknown'} after "
                    f"{(event.occurred_at - at).total_seconds():.1f} s",
                }
            )
    for at, request in asked.values():  # still waiting
        approvals.append(
            {
                "kind": "approval",
                "key": f"approval_{request.get('call_id')}",
                "label": f"approval {request.get('tool')}",
                "cls": "waiting",
                "start": secs(at),
                "end": secs(end) if end is not None else secs(at),
                "approved_by": None,
                "title": f"asked for {request.get('tool')} ({request.get('call_id')}): waiting",
            }
        )
    stages: dict[str, dict[str, Any]] = {}
    for span in tools:
        name = span.get("stage")
        if not name:
            continue
        found = stages.get(name)
        if found is None:
            stages[name] = {
                "kind": "stage",
                "key": f"stage_{name}",
                "label": f"stage {name}",
                "cls": "stage",
                "start": span["start"],
                "end": span["end"],
                "title": f"stage {name}",
            }
        else:
            found["start"] = min(found["start"], span["start"])
            found["end"] = max(found["end"], span["end"])
    timed = sorted(models + tools + approvals, key=lambda s: (s["start"], s["key"]))
    spans = [*stages.values(), *timed]
    last = max([s["end"] for s in spans] + [secs(end) if end is not None else 0.0])
    return {
        "run_id": run_id,
        "started_at": origin.isoformat().replace("+00:00", "Z"),
        "duration_s": round(max(last, 0.0), 6),
        "spans": spans,
    }


__all__ = ["build"]
