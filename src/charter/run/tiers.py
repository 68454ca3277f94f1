"""Autonomy tiers: which tier a run acts in, and which calls the tier applies to.

A run's tier is the persona's ``autonomy_tier``, capped by its ``rollout_policy.mode``
for the work in the capped arm (:mod:`charter.run.rollout`: ``disabled``/``shadow``/
``dry_run`` -> shadow, ``approval_only`` -> act_with_approval for the selected work;
``canary`` -> shadow for the work outside the canary; ``full`` -> no cap), by the
persona's standing (a promotion replaces the mode's cap, a demotion caps every arm) and
by an explicit ``--tier`` for this run. Nothing raises a run above the declared tier.

The tier applies to *side-effecting* calls: a tool whose side-effect level is above
``read_only`` (unannotated tools count as ``network``). The policy decision stays
:func:`charter.policy.decide`: the tier is an approval layer over an allowed call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from charter.manifest import AutonomyTier, RolloutPolicy
from charter.policy import SideEffectLevel, ToolAnnotations

from .rollout import RolloutArm, select_arm

TIERS: tuple[str, ...] = tuple(t.value for t in AutonomyTier)  # most cautious first
SHADOW, SUGGEST, ACT_WITH_APPROVAL, ACT_AUTO = TIERS


def tier_rank(tier: str) -> int:
    try:
        return TIERS.index(tier)
    except ValueError:
        raise ValueError(
            f"unknown autonomy tier {tier!r}; expected one of {', '.join(TIERS)}"
        ) from None


_MODE_CAPS: dict[str, str] = {
    "disabled": SHADOW,
    "shadow": SHADOW,
    "dry_run": SHADOW,
    "approval_only": ACT_WITH_APPROVAL,
    "canary": SHADOW,  # applies to the work outside the canary
}


def lower(a: str, b: str) -> str:
    """The more cautious of two tiers."""
    return a if tier_rank(a) <= tier_rank(b) else b


def effective_tier(
    declared: str,
    rollout: RolloutPolicy | None,
    work_key: str,
    requested: str | None = None,
    *,
    arm: RolloutArm | None = None,
    standing: Mapping[str, Any] | None = None,
) -> tuple[str, str]:
    """``(tier, reason)`` for one run: the minimum of the manifest's tier, the rollout
    arm's cap (or the tier a promotion granted in its place), a demotion, and ``requested``.
    """
    tier_rank(declared)
    tier, reason = declared, f"autonomy_tier = {declared}"
    if arm is None:
        arm = select_arm(rollout, work_key)
    kind = standing.get("kind") if standing else None
    granted = str(standing["tier"]) if standing and kind == "promoted" else None
    if arm.capped:
        mode = arm.mode or ""
        if granted is not None:
            cap, why = granted, f"promoted to {granted} (persona.autonomy.promoted)"
        else:
            cap, why = _MODE_CAPS[mode], f"rollout_policy.mode = {mode} caps autonomy_tier"
        if tier_rank(cap) < tier_rank(tier):
            tier, reason = cap, f"{why}; {arm.arm} arm ({arm.reason})"
    if standing and kind == "demoted":
        demoted = str(standing["tier"])
        if tier_rank(demoted) < tier_rank(tier):
            tier, reason = demoted, f"demoted to {demoted} (persona.autonomy.demoted)"
    if requested is not None and tier_rank(requested) < tier_rank(tier):
        tier, reason = requested, f"lowered to {requested} for this run (was {tier})"
    return tier, reason


def is_side_effecting(annotations: ToolAnnotations) -> bool:
    """Above ``read_only`` (fail closed: no annotation counts as ``network``)."""
    return annotations.effective_level > SideEffectLevel.READ_ONLY


__all__ = [
    "ACT_AUTO",
    "ACT_WITH_APPROVAL",
    "SHADOW",
    "SUGGEST",
    "TIERS",
    "effective_tier",
    "lower",
    "is_side_effecting",
    "tier_rank",
]
