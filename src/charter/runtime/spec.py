"""The runtime's own typed view of a persona (the manifest package adapts to it)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from charter.errors import CharterError

DEFAULT_LEASE_TTL_SECONDS = 300.0
DEFAULT_DUPLICATE_WINDOW_SECONDS = 24 * 3600.0
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_RETRY_BACKOFF_SECONDS = 5.0


class SpecError(CharterError, ValueError):
    """Persona runtime data is invalid."""


def _non_negative(name: str, value: float | None) -> None:
    if value is not None and (not math.isfinite(value) or value < 0):
        raise SpecError(f"budget.{name} must be a non-negative number, got {value!r}")


@dataclass(frozen=True)
class BudgetSpec:
    """Caps checked before work is recorded; ``None`` means no cap.

    ``hourly_usd``/``daily_usd`` apply to the UTC hour/day, ``run_usd`` to one run's cost,
    ``max_tokens`` to tokens per UTC day.
    """

    daily_usd: float | None = None
    hourly_usd: float | None = None
    run_usd: float | None = None
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        for name in ("daily_usd", "hourly_usd", "run_usd"):
            _non_negative(name, getattr(self, name))
        if self.max_tokens is not None and self.max_tokens < 0:
            raise SpecError(f"budget.max_tokens must be >= 0, got {self.max_tokens!r}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> BudgetSpec:
        if not data:
            return cls()

        def num(key: str) -> float | None:
            value = data.get(key)
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise SpecError(f"budget.{key} must be a number, got {value!r}")
            return float(value)

        tokens = data.get("max_tokens")
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int)):
            raise SpecError(f"budget.max_tokens must be an integer, got {tokens!r}")
        return cls(num("daily_usd"), num("hourly_usd"), num("run_usd"), tokens)

    def to_dict(self) -> dict[str, Any]:
        return {
            "daily_usd": self.daily_usd,
            "hourly_usd": self.hourly_usd,
            "run_usd": self.run_usd,
            "max_tokens": self.max_tokens,
        }


@dataclass(frozen=True)
class PersonaRuntimeSpec:
    """What the runtime needs to know about one persona."""

    name: str
    version: str | None = None
    triggers: tuple[str, ...] = ()
    schedules: tuple[str, ...] = ()
    budget: BudgetSpec = field(default_factory=BudgetSpec)
    handoffs: tuple[str, ...] = ()
    max_concurrency: int = 1
    lease_ttl_seconds: float = DEFAULT_LEASE_TTL_SECONDS
    duplicate_window_seconds: float = DEFAULT_DUPLICATE_WINDOW_SECONDS
    #: attempts of work whose run's lease expired before it is dead-lettered
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    #: wait before the second attempt, doubled for each later one
    retry_backoff_seconds: float = DEFAULT_RETRY_BACKOFF_SECONDS

    def __post_init__(self) -> None:
        if not self.name:
            raise SpecError("a persona needs a name")
        if self.max_concurrency < 1:
            raise SpecError(f"{self.name}: max_concurrency must be >= 1")
        if self.lease_ttl_seconds <= 0:
            raise SpecError(f"{self.name}: lease_ttl_seconds must be > 0")
        if self.duplicate_window_seconds < 0:
            raise SpecError(f"{self.name}: duplicate_window_seconds must be >= 0")
        if self.max_attempts < 1:
            raise SpecError(f"{self.name}: max_attempts must be >= 1")
        if self.retry_backoff_seconds < 0:
            raise SpecError(f"{self.name}: retry_backoff_seconds must be >= 0")
        for trigger in self.triggers:
            if "." not in trigger.strip(".") and trigger != "*":
                raise SpecError(
                    f"{self.name}: trigger {trigger!r} must be 'provider.kind' "
                    "(e.g. github.pr_opened)"
                )


BUILTIN_PREDICATES = ("always", "budget_exhausted", "approval_denied")


@dataclass(frozen=True)
class RouteRule:
    target: str
    when: str = "always"


@dataclass(frozen=True)
class HandoffRoute:
    """A ``[[handoff_routes]]`` entry: for handoffs of ``kind`` from ``from_persona``."""

    id: str
    kind: str | None
    from_persona: str | None
    rules: tuple[RouteRule, ...]

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> HandoffRoute:
        route_id = data.get("id")
        if not isinstance(route_id, str) or not route_id:
            raise SpecError("handoff route needs a string 'id'")
        raw_rules = data.get("route")
        if not isinstance(raw_rules, Sequence) or isinstance(raw_rules, str) or not raw_rules:
            raise SpecError(f"handoff route {route_id!r}: 'route' must be a non-empty list")
        rules: list[RouteRule] = []
        for index, raw in enumerate(raw_rules):
            if not isinstance(raw, Mapping) or not isinstance(raw.get("target"), str):
                raise SpecError(f"handoff route {route_id!r}: route[{index}] needs a 'target'")
            when = raw.get("when", "always")
            if not isinstance(when, str) or not when:
                raise SpecError(f"handoff route {route_id!r}: route[{index}].when must be a name")
            rules.append(RouteRule(raw["target"], when))
        kind = data.get("kind")
        source = data.get("from")
        if kind is not None and not isinstance(kind, str):
            raise SpecError(f"handoff route {route_id!r}: 'kind' must be a string")
        if source is not None and not isinstance(source, str):
            raise SpecError(f"handoff route {route_id!r}: 'from' must be a string")
        return cls(route_id, kind, source, tuple(rules))
