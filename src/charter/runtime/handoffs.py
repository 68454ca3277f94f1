"""Handoff routes: first-match route selection, dispatch records and the target inbox."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from charter.policy import Frame, Policy, PolicyError, with_handoff_policy

from .budget import exhaustion_active
from .clock import format_time
from .engine import Batch, PersonaRuntime, PersonaRuntimeError
from .events import Kind
from .spec import BUILTIN_PREDICATES, HandoffRoute


class HandoffError(PersonaRuntimeError):
    """No route matched, an unknown predicate or target, or an invalid policy_override."""


@dataclass(frozen=True)
class Handoff:
    """A typed handoff artifact emitted by a persona."""

    kind: str
    from_persona: str
    payload: dict[str, Any] = field(default_factory=dict)
    summary: str | None = None
    policy_override: dict[str, Any] | None = None


Predicate = Callable[["Handoff", "RouteContext"], bool]


@dataclass(frozen=True)
class RouteContext:
    """Facts route predicates see; ``predicates`` supplies custom ones by name."""

    budget_exhausted: bool = False
    approval_denied: bool = False
    predicates: Mapping[str, Predicate] = field(default_factory=dict)
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SelectedRoute:
    route_id: str
    rule_index: int
    target: str
    when: str


@dataclass(frozen=True)
class HandoffTarget:
    scheme: str  # persona | human | worker | a2a
    name: str

    @classmethod
    def parse(cls, target: str) -> HandoffTarget:
        if target.startswith("persona://"):
            return cls("persona", target.removeprefix("persona://"))
        if target.startswith("human:"):
            return cls("human", target.removeprefix("human:"))
        if target.startswith("worker://"):
            return cls("worker", target.removeprefix("worker://"))
        if target.startswith("a2a://"):
            return cls("a2a", target)
        if "://" in target or ":" in target or not target:
            raise HandoffError(f"unsupported handoff target {target!r}")
        return cls("persona", target)


@dataclass(frozen=True)
class HandoffRecord:
    handoff_id: str
    route: SelectedRoute
    target: HandoffTarget
    handoff: Handoff
    audit: dict[str, Any]
    at: str
    event_ids: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "handoff_id": self.handoff_id,
            "route_id": self.route.route_id,
            "rule_index": self.route.rule_index,
            "when": self.route.when,
            "target": self.route.target,
            "target_kind": self.target.scheme,
            "kind": self.handoff.kind,
            "from": self.handoff.from_persona,
            "policy_override": self.handoff.policy_override,
            "audit": self.audit,
            "at": self.at,
            "event_ids": list(self.event_ids),
        }


Dispatcher = Callable[[HandoffRecord], None]


def _holds(when: str, handoff: Handoff, context: RouteContext) -> bool:
    if when == "always":
        return True
    if when == "budget_exhausted":
        return context.budget_exhausted
    if when == "approval_denied":
        return context.approval_denied
    predicate = context.predicates.get(when)
    if predicate is None:
        raise HandoffError(
            f"unknown route predicate {when!r}: built-ins are {', '.join(BUILTIN_PREDICATES)}; "
            "custom ones are passed in RouteContext.predicates"
        )
    return bool(predicate(handoff, context))


def select_route(
    routes: Sequence[HandoffRoute], handoff: Handoff, context: RouteContext
) -> SelectedRoute | None:
    """The first rule, in declared order, whose route matches and whose predicate holds."""
    for route in routes:
        if route.kind is not None and route.kind != handoff.kind:
            continue
        if route.from_persona is not None and route.from_persona != handoff.from_persona:
            continue
        for index, rule in enumerate(route.rules):
            if _holds(rule.when, handoff, context):
                return SelectedRoute(route.id, index, rule.target, rule.when)
    return None


def route_context(
    runtime: PersonaRuntime,
    persona: str,
    *,
    now: datetime,
    approval_denied: bool = False,
    predicates: Mapping[str, Predicate] | None = None,
) -> RouteContext:
    """A context whose ``budget_exhausted`` comes from the persona's projected status."""
    state = runtime.state(persona)
    return RouteContext(
        budget_exhausted=exhaustion_active(state.exhaustion, now),
        approval_denied=approval_denied,
        predicates=dict(predicates or {}),
    )


def dispatch_handoff(
    runtime: PersonaRuntime,
    handoff: Handoff,
    *,
    at: datetime,
    context: RouteContext | None = None,
    dispatchers: Mapping[str, Dispatcher] | None = None,
) -> HandoffRecord:
    """Select a route, record the dispatch and land persona targets in their inbox.

    After the commit, ``dispatchers[scheme]`` (``persona``, ``human``, ``worker``,
    ``a2a``) is called with the record: local hooks for tests and embedded adapters.
    """
    if context is None:
        context = route_context(runtime, handoff.from_persona, now=at)
    selected = select_route(runtime.routes, handoff, context)
    if selected is None:
        raise HandoffError(
            f"no handoff route matches kind {handoff.kind!r} from {handoff.from_persona!r}"
        )
    target = HandoffTarget.parse(selected.target)
    if target.scheme == "persona" and target.name not in runtime.personas:
        raise HandoffError(f"handoff target persona {target.name!r} is not known")
    if target.scheme == "worker" and target.name not in runtime.personas:
        # a worker is a persona run through admission; one this runtime cannot run would
        # be a handoff recorded as dispatched that never arrives
        raise HandoffError(
            f"handoff target worker://{target.name} names no persona this runtime runs "
            f"(known: {', '.join(sorted(runtime.personas)) or 'none'})"
        )
    if handoff.policy_override is not None:
        try:
            Policy.from_dict(handoff.policy_override)
        except PolicyError as exc:
            raise HandoffError(f"invalid policy_override: {exc}") from None

    def body(batch: Batch) -> HandoffRecord:
        handoff_id = batch.new_id("handoff")
        audit = {"scope": {"source_handoff": handoff_id}}
        common = {
            "handoff_id": handoff_id,
            "route_id": selected.route_id,
            "rule_index": selected.rule_index,
            "when": selected.when,
            "target": selected.target,
            "kind": handoff.kind,
            "from": handoff.from_persona,
            "summary": handoff.summary,
            "policy_override": handoff.policy_override,
            "audit": audit,
        }
        first = batch.next_id
        batch.emit(handoff.from_persona, Kind.HANDOFF_DISPATCHED, common)
        if target.scheme in ("persona", "worker"):
            # worker://NAME lands in NAME's inbox like a persona target: the next
            # `persona run --inbox` or `charter serve` admits and runs it under NAME's
            # policy, or the route's policy_override
            batch.emit(target.name, Kind.HANDOFF_RECEIVED, {**common, "payload": handoff.payload})
        elif target.scheme == "human":
            # an item a person sees (charter inbox, the console), with what caused it
            batch.emit(
                handoff.from_persona,
                Kind.HUMAN_INBOX_CREATED,
                {
                    **common,
                    "item_id": batch.new_id("inbox"),
                    "group": target.name,
                    "payload": handoff.payload,
                    "caused_by": {"event_id": first, "kind": Kind.HANDOFF_DISPATCHED},
                },
            )
        return HandoffRecord(
            handoff_id,
            selected,
            target,
            handoff,
            audit,
            format_time(batch.at),
            tuple(range(first, batch.next_id)),
        )

    record = runtime.transact(at, body)
    hook = (dispatchers or {}).get(target.scheme)
    if hook is not None:
        hook(record)
    return record


@contextmanager
def adopt_handoff_policy(inbox_item: Mapping[str, Any]) -> Iterator[Frame | None]:
    """Make an inbox handoff's ``policy_override`` the run's top (and only) policy frame.

    A replacement, not a merge (seed 003); the frame records ``source_handoff``. Yields
    ``None`` and leaves the stack alone when the handoff carries no override.
    """
    override = inbox_item.get("policy_override")
    if override is None:
        yield None
        return
    source = str(inbox_item.get("audit", {}).get("scope", {}).get("source_handoff") or "")
    with with_handoff_policy(
        override, source_handoff=source or str(inbox_item["handoff_id"])
    ) as frame:
        yield frame
