"""Autonomy tiers: which tier a run acts in, and which calls the tier applies to.

A run's tier is the persona's ``autonomy_tier``, capped by its ``rollout_policy.mode``
(``disabled``/``shadow``/``dry_run`` -> shadow, ``approval_only`` -> act_with_approval,
``canary`` -> the declared tier for ``percentage`` % of work keys and shadow for the
rest, ``full`` -> the declared tier) and by an explicit ``--tier`` for this run. Every cap
only lowers; nothing raises the declared tier.

The tier applies to *side-effecting* calls: a tool whose side-effect level is above
``read_only`` (unannotated tools count as ``network``). The policy decision stays
:func:`charter.policy.decide`: the tier is an approval layer over an allowed call.
"""

from __future__ import annotations

import hashlib

from charter.manifest import AutonomyTier, RolloutPolicy
from charter.policy import SideEffectLevel, ToolAnnotations

TIERS: tuple[str, ...] = tuple(t.value for t in AutonomyTier)  # most cautious first
SHADOW, SUGGEST, ACT_WITH_APPROVAL, ACT_AUTO = TIERS


def tier_rank(tier: str) -> int:
    try:
        return TIERS.index(tier)
    except ValueError:
        raise ValueError(
            f"unknown autonomy tier {tier!r}; expected one of {', '.join(TIERS)}"
        ) from None


def _in_canary(work_key: str, percentage: float | None) -> bool:
    if percentage is None:
        return True
    digest = hashlib.sha256(work_key.encode()).digest()
    bucket = int.from_bytes(digest[:4], "big") % 10000 / 100.0
    return bucket < percentage


def effective_tier(
    declared: str,
    rollout: RolloutPolicy | None,
    work_key: str,
    requested: str | None = None,
) -> tuple[str, str]:
    """``(tier, reason)`` for one run."""
    tier, reason = declared, f"autonomy_tier = {declared}"
    tier_rank(declared)
    mode = rollout.mode if rollout is not None else None
    cap: str | None = None
    if mode in ("disabled", "shadow", "dry_run"):
        cap = SHADOW
    elif mode == "approval_only":
        cap = ACT_WITH_APPROVAL
    elif mode == "canary" and rollout is not None and not _in_canary(work_key, rollout.percentage):
        cap = SHADOW
    if cap is not None and tier_rank(cap) < tier_rank(tier):
        tier, reason = cap, f"rollout_policy.mode = {mode} caps autonomy_tier {declared}"
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
    "is_side_effecting",
    "tier_rank",
]
