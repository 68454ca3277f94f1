"""What a persona proposed, and what people then did, in one small vocabulary.

Outcomes are short strings compared for equality: ``merged``, ``closed``,
``review:approved``, ``review:changes_requested``, ``review:commented``,
``check:<conclusion>``, ``resolved``, ``completed``, ``canceled``. A trigger may also
carry ``metadata.outcome`` explicitly (``charter persona trigger --metadata outcome=merged``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: Words in a proposed call (tool name, ``action``/``operation``/``event`` argument) -> outcome.
_VERBS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"request[_-]?changes"), "review:changes_requested"),
    (re.compile(r"approve"), "review:approved"),
    (re.compile(r"merge"), "merged"),
    (re.compile(r"resolve"), "resolved"),
    (re.compile(r"cancel"), "canceled"),
    (re.compile(r"close"), "closed"),
    (re.compile(r"complete"), "completed"),
    (re.compile(r"comment"), "review:commented"),
)


def dig(data: Any, *path: str) -> Any:
    """``data[path[0]][path[1]]...``, or ``None`` where a step is missing or not a mapping."""
    for key in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def outcome_from_trigger(
    provider: str | None,
    kind: str | None,
    metadata: Mapping[str, str] | None,
    payload: Mapping[str, Any] | None,
) -> str | None:
    """The outcome a later trigger reports for its work key, or ``None``."""
    explicit = (metadata or {}).get("outcome")
    if explicit:
        return explicit.strip().lower()
    body: Mapping[str, Any] = payload if isinstance(payload, Mapping) else {}
    provider = (provider or "").lower()
    kind = (kind or "").lower()
    action = str(body.get("action") or (metadata or {}).get("action") or "").lower()
    if provider == "github":
        if kind == "pr_merged" or (
            action == "closed" and dig(body, "pull_request", "merged") is True
        ):
            return "merged"
        if kind in ("pr_closed", "issue_closed") or (
            action == "closed" and isinstance(body.get("pull_request") or body.get("issue"), dict)
        ):
            return "closed"
        if kind == "review_submitted" or (action == "submitted" and "review" in body):
            state = dig(body, "review", "state")
            return f"review:{str(state).lower()}" if state else None
        if action == "completed":
            conclusion = dig(body, "check_run", "conclusion") or dig(
                body, "check_suite", "conclusion"
            )
            return f"check:{conclusion}" if conclusion else None
        return None
    if provider == "pagerduty":
        event_type = str(dig(body, "event", "event_type") or kind)
        return "resolved" if event_type.endswith("resolved") else None
    if provider == "linear":
        state = str(dig(body, "data", "state", "type") or "").lower()
        if state in ("completed", "canceled"):
            return state
        return None
    return None


def _call_verbs(call: Mapping[str, Any]) -> str:
    args = call.get("arguments")
    words = [str(call.get("tool") or "")]
    if isinstance(args, Mapping):
        for key in ("action", "operation", "event", "verb", "method"):
            if isinstance(args.get(key), str):
                words.append(args[key])
    return " ".join(words).lower()


def predicted_outcome(record: Mapping[str, Any]) -> str | None:
    """The outcome a shadow/suggest run proposed (its run record), or ``None``.

    The workflow may say so itself (``return {"proposed_outcome": "merged"}``); otherwise
    the last dry-run or proposed call whose verbs name an outcome decides.
    """
    result = record.get("result")
    if isinstance(result, Mapping) and isinstance(result.get("proposed_outcome"), str):
        return str(result["proposed_outcome"]).strip().lower() or None
    calls = [*(record.get("dry_runs") or ()), *(record.get("proposals") or ())]
    found: str | None = None
    for call in calls:
        if not isinstance(call, Mapping):
            continue
        words = _call_verbs(call)
        for pattern, outcome in _VERBS:
            if pattern.search(words):
                found = outcome
                break
    return found


__all__ = ["dig", "outcome_from_trigger", "predicted_outcome"]
