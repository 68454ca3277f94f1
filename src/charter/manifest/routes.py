"""``[[handoff_routes]]`` and ``[[triggers]]`` tables."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from .cron import cron_error
from .errors import Collector, join
from .fields import read_table
from .persona import parse_policy
from .reach import unreceived
from .spec import BUILTIN_PREDICATES, HANDOFF_ROUTE, TRIGGER
from .syntax import TriggerName, check_event, parse_target
from .workflow_model import HandoffRoute, RouteStep, TriggerSpec


def _known_persona(target_name: str, known: Collection[str]) -> str | None:
    if target_name in known:
        return None
    return f"unknown persona {target_name!r}; known personas: {', '.join(sorted(known)) or 'none'}"


def build_route(
    data: Any, path: str, col: Collector, known: Collection[str], custom_predicates: Collection[str]
) -> HandoffRoute | None:
    """Validate one handoff route against the known personas and predicates."""
    start = len(col.errors)
    checked = read_table(data, HANDOFF_ROUTE, path, col)
    if checked is None:
        return None
    origin = checked.get("from")
    if origin is not None and (err := _known_persona(origin, known)):
        col.add(join(path, "from"), err)
    custom = {v for _, v in checked.get("custom_predicates", ())} | set(custom_predicates)
    steps: list[RouteStep] = []
    items = checked.get("route")
    if items is not None and not items:
        col.add(join(path, "route"), "empty route; expected at least one { target, when } entry")
    for i, item in enumerate(items or ()):
        step_path = join(join(path, "route"), i)
        if item is None or "target" not in item:
            continue
        target = parse_target(item["target"])
        if isinstance(target, str):
            col.add(join(step_path, "target"), target)
            continue
        if target.kind in ("persona", "worker") and (err := _known_persona(target.value, known)):
            # (worker://NAME lands in NAME's inbox: it names a persona too)
            col.add(join(step_path, "target"), f"unknown handoff target: {err}")
        when = item.get("when", "always")
        if when not in BUILTIN_PREDICATES and when not in custom:
            col.add(
                join(step_path, "when"),
                f"unknown predicate {when!r}; built-in predicates are "
                f"{', '.join(BUILTIN_PREDICATES)} (declare others in custom_predicates)",
            )
        override = None
        if "policy_override" in item:
            override = parse_policy(
                item["policy_override"], join(step_path, "policy_override"), col
            )
        steps.append(RouteStep(target, when, override))
    if len(col.errors) > start or origin is None:
        return None
    return HandoffRoute(
        id=checked["id"],
        from_persona=origin,
        route=tuple(steps),
        kind=checked.get("kind"),
        custom_predicates=tuple(sorted(custom)),
    )


def unreachable_steps(routes: Collection[HandoffRoute]) -> list[str]:
    """Route steps that can never be chosen: the first step whose ``when`` holds is taken,
    so everything after an unconditional ``always`` is dead."""
    out: list[str] = []
    for route in routes:
        first_always = next((i for i, s in enumerate(route.route) if s.when == "always"), None)
        if first_always is None:
            continue
        for j, step in enumerate(route.route[first_always + 1 :], start=first_always + 1):
            out.append(
                f"handoff route {route.id!r}: route[{j}] ({step.target.raw}, when = "
                f"{step.when!r}) can never be chosen; route[{first_always}] before it is "
                "unconditional (when = 'always'): put it last"
            )
    return out


def build_trigger(
    data: Any, path: str, col: Collector, known: Collection[str]
) -> TriggerSpec | None:
    """Validate one explicit trigger registration."""
    start = len(col.errors)
    checked = read_table(data, TRIGGER, path, col)
    if checked is None:
        return None
    kind = checked.get("kind", "webhook")
    handler = None
    if "handler" in checked:
        parsed = parse_target(checked["handler"])
        if isinstance(parsed, str) or parsed.kind != "persona":
            col.add(
                join(path, "handler"),
                f"expected persona://name or a persona name, got {checked['handler']!r}",
            )
        elif err := _known_persona(parsed.value, known):
            col.add(join(path, "handler"), err)
        else:
            handler = parsed
    match = checked.get("match") or {}
    events = tuple(v for _, v in match.get("events", ()))
    provider = checked.get("provider")
    for i, event in match.get("events", ()):
        where = join(join(join(path, "match"), "events"), i)
        if err := check_event(event):
            col.add(where, err)
        elif kind == "webhook" and provider and (why := unreceived(TriggerName(provider, event))):
            col.warn("trigger_not_received", where, why)
    schedule = checked.get("schedule")
    if schedule is not None and (err := cron_error(schedule)):
        col.add(join(path, "schedule"), err)
    if kind == "schedule" and schedule is None and "schedule" not in (data or {}):
        col.add(join(path, "schedule"), "missing required field for kind = 'schedule'")
    if kind in ("webhook", "poll"):
        if "provider" not in checked and "provider" not in data:
            col.add(join(path, "provider"), f"missing required field for kind = {kind!r}")
        if not events and "match" not in data:
            col.add(join(path, "match"), f"missing match.events for kind = {kind!r}")
    if len(col.errors) > start or handler is None:
        return None
    return TriggerSpec(
        id=checked["id"],
        kind=kind,
        handler=handler,
        provider=checked.get("provider"),
        events=events,
        metadata=dict(match.get("metadata", {})),
        schedule=schedule,
    )
