"""The parts of the persona model that run-time features read: rollout promotion, the
package source, stages, handoff routes and triggers.

Kept out of :mod:`charter.manifest.model` (which re-exports them) so that loading a
persona that declares none of them, as ``charter launch`` and ``print-policy`` mostly do,
does not build these dataclasses: each costs about half a millisecond at import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from charter.policy import Policy, Rules, SideEffectLevel

from .syntax import HandoffTarget


@dataclass(frozen=True, slots=True)
class Promotion:
    """``[rollout_policy.promotion]``: what the receipts must show (seed 003, issue 18)."""

    min_runs: int | None = None
    min_agreement: float | None = None
    max_denials_per_run: float | None = None
    max_cost_per_run: float | None = None
    window: str = "30d"
    max_disagreement_streak: int = 5

    @property
    def declared(self) -> bool:
        """Whether any promotion criterion is set."""
        return any(
            v is not None
            for v in (
                self.min_runs,
                self.min_agreement,
                self.max_denials_per_run,
                self.max_cost_per_run,
            )
        )


@dataclass(frozen=True, slots=True)
class PackageSource:
    package: str | None = None
    version: str | None = None
    path: str | None = None
    git: str | None = None
    rev: str | None = None


@dataclass(frozen=True, slots=True)
class StageExit:
    on_complete: str | None = None
    on_failure: str | None = None


@dataclass(frozen=True, slots=True)
class Stage:
    """A workflow step with its own tool surface (seed 000)."""

    name: str
    allowed_tools: tuple[str, ...] | None = None
    side_effect_level: SideEffectLevel | None = None
    max_iterations: int | None = None
    on_exit: StageExit | None = None

    def policy(self, persona: str | None = None) -> Policy:
        """The frame pushed while the stage runs (intersects with the persona's frame)."""
        tools = Rules((self.allowed_tools,)) if self.allowed_tools is not None else Rules()
        label = f"{persona}/{self.name}" if persona else self.name
        return Policy(tools=tools, side_effect_level=self.side_effect_level, name=label)


@dataclass(frozen=True, slots=True)
class RouteStep:
    target: HandoffTarget
    when: str = "always"
    policy_override: Policy | None = None


@dataclass(frozen=True, slots=True)
class HandoffRoute:
    """``[[handoff_routes]]``: where a persona's handoffs of a kind may go, in order."""

    id: str
    from_persona: str
    route: tuple[RouteStep, ...]
    kind: str | None = None
    custom_predicates: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TriggerSpec:
    """An explicit ``[[triggers]]`` registration."""

    id: str
    kind: str
    handler: HandoffTarget
    provider: str | None = None
    events: tuple[str, ...] = ()
    metadata: dict[str, str] = field(default_factory=dict)
    schedule: str | None = None


@dataclass(frozen=True, slots=True)
class TriggerBinding:
    """A normalised (provider, event) -> persona registration, from either declaration form."""

    provider: str
    event: str
    persona: str
    source: str  # "persona" (the persona's triggers list) or the [[triggers]] id

    def to_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "event": self.event,
            "handler": f"persona://{self.persona}",
            "handler_kind": "persona",
            "source": self.source,
        }
