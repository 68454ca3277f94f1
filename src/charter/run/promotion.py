"""Autonomy a persona earns: the rollout report, promotion and automatic demotion.

Everything here is computed from the evidence projection (:mod:`charter.run.evidence`),
never from a second store: agreement events link a shadow/suggest proposal to the outcome
people chose (a later webhook or ``charter persona feedback``); ``promote`` appends
``persona.autonomy.promoted`` only when the receipts meet ``[rollout_policy.promotion]``;
a breach in the window appends ``persona.autonomy.demoted`` and drops one tier.
The effective tier stays the minimum of the manifest's tier, the rollout arm and any
demotion (:func:`charter.run.tiers.effective_tier`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from charter.manifest import Persona, Promotion, parse_window
from charter.runtime import Batch, EventLog, PersonaRuntime, TriggerError, format_time
from charter.runtime.triggers import normalize_trigger, subject_of

from . import evidence as ev
from .errors import RunError
from .events import RunKind
from .outcomes import outcome_from_trigger
from .rollout import OUTSIDE, ROLLOUT, RolloutArm
from .tiers import SHADOW, TIERS, effective_tier, tier_rank

Z95 = 1.959963984540054


class PromotionError(RunError):
    """A promotion, feedback or report request that the evidence or manifest refuses."""

    def __init__(self, message: str, *, kind: str = "refused", details: Any = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.details = details


def wilson(successes: float, total: float, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``successes/total`` (``(0, 1)`` with no trials)."""
    if total <= 0:
        return 0.0, 1.0
    p = successes / total
    denom = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    # the interval always holds p; clamp the rounding error at p = 0 and p = 1
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))


def _promotion(persona: Persona) -> Promotion:
    return persona.rollout_policy.promotion or Promotion()


def window_start(persona: Persona, now: datetime) -> datetime:
    return now - parse_window(_promotion(persona).window)


def _sum(rows: list[ev.Row]) -> dict[str, float]:
    total = dict.fromkeys(ev.COUNTERS, 0.0)
    for row in rows:
        for key in ev.COUNTERS:
            total[key] += row.counters.get(key, 0)
    return total


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def summarize(c: Mapping[str, float]) -> dict[str, Any]:
    """Rates of one set of counters (the report's per-arm and total shape)."""
    runs = c["runs"]
    judged = c["agreed"] + c["disagreed"]
    low, high = wilson(c["agreed"], judged)
    return {
        "runs": int(runs),
        "completed": int(c["completed"]),
        "failed": int(c["failed"]),
        "budget_stops": int(c["budget_stops"]),
        "proposals": int(c["proposals"]),
        "denials": int(c["denials"]),
        "denials_per_run": _r(c["denials"] / runs) if runs else None,
        "approvals": {
            "granted": int(c["approvals_granted"]),
            "denied": int(c["approvals_denied"]),
            "expired": int(c["approvals_expired"]),
        },
        "time_to_approval_s": _r(c["approval_wait_s"] / c["approval_waits"], 1)
        if c["approval_waits"]
        else None,
        "cost_usd": _r(c["cost_usd"], 6),
        "cost_per_run": _r(c["cost_usd"] / runs, 6) if runs else None,
        "agreement": {
            "agreed": int(c["agreed"]),
            "disagreed": int(c["disagreed"]),
            "rate": _r(c["agreed"] / judged) if judged else None,
            "wilson_low": _r(low) if judged else None,
            "wilson_high": _r(high) if judged else None,
        },
        "cost_per_agreed_action": _r(c["cost_usd"] / c["agreed"], 6) if c["agreed"] else None,
    }


@dataclass(frozen=True)
class Check:
    criterion: str
    required: float
    actual: float | None
    ok: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "criterion": self.criterion,
            "required": self.required,
            "actual": self.actual,
            "ok": self.ok,
        }

    def describe(self) -> str:
        op = ">=" if self.criterion in ("min_runs", "min_agreement") else "<="
        actual = "no data" if self.actual is None else f"{self.actual:g}"
        mark = "ok" if self.ok else "NOT MET"
        return f"{self.criterion}: {actual} (needs {op} {self.required:g}) {mark}"


def evaluate(persona: Persona, evidence: ev.Evidence, now: datetime) -> list[Check]:
    """The promotion criteria against the evidence at the current standing, in the window."""
    crit = _promotion(persona)
    c = _sum(evidence.window(window_start(persona, now), epoch=evidence.epoch))
    runs = c["runs"]
    checks: list[Check] = []
    if crit.min_runs is not None:
        checks.append(Check("min_runs", crit.min_runs, runs, runs >= crit.min_runs))
    if crit.min_agreement is not None:
        judged = c["agreed"] + c["disagreed"]
        low = wilson(c["agreed"], judged)[0] if judged else None
        ok = low is not None and low >= crit.min_agreement
        checks.append(Check("min_agreement", crit.min_agreement, _r(low), ok))
    if crit.max_denials_per_run is not None:
        rate = c["denials"] / runs if runs else None
        ok = rate is not None and rate <= crit.max_denials_per_run
        checks.append(Check("max_denials_per_run", crit.max_denials_per_run, _r(rate), ok))
    if crit.max_cost_per_run is not None:
        cost = c["cost_usd"] / runs if runs else None
        ok = cost is not None and cost <= crit.max_cost_per_run
        checks.append(Check("max_cost_per_run", crit.max_cost_per_run, _r(cost, 6), ok))
    return checks


def arm_tiers(persona: Persona, standing: Mapping[str, Any] | None) -> dict[str, str]:
    """The tier each arm runs at now (before any per-run ``--tier``)."""
    declared = persona.autonomy_tier.value
    mode = persona.rollout_policy.mode
    out: dict[str, str] = {}
    for arm in (ROLLOUT, OUTSIDE):
        capped = mode not in (None, "full") and ((arm == OUTSIDE) == (mode == "canary"))
        fake = RolloutArm(arm, 0, mode, None, capped, "")
        out[arm] = effective_tier(
            declared, persona.rollout_policy, "", arm=fake, standing=standing
        )[0]
    return out


def capped_tier(persona: Persona, standing: Mapping[str, Any] | None) -> str | None:
    """The tier of the arm the rollout mode caps (what a promotion raises), or ``None``."""
    mode = persona.rollout_policy.mode
    if mode in (None, "full"):
        return None
    return arm_tiers(persona, standing)[OUTSIDE if mode == "canary" else ROLLOUT]


def report(
    persona: Persona, evidence: ev.Evidence, now: datetime, since: datetime | None = None
) -> dict[str, Any]:
    """``charter persona rollout report`` as a JSON-ready dict."""
    start = since if since is not None else window_start(persona, now)
    rows = evidence.window(start)
    arms: dict[tuple[str, str], list[ev.Row]] = {}
    cohorts: dict[str, list[ev.Row]] = {}
    for row in rows:
        arms.setdefault((row.arm, row.tier), []).append(row)
        cohorts.setdefault(row.cohort, []).append(row)
    checks = evaluate(persona, evidence, now)
    crit = persona.rollout_policy.promotion
    current = capped_tier(persona, evidence.standing)
    declared = persona.autonomy_tier.value
    nxt: str | None = None
    if current is not None and tier_rank(current) < tier_rank(declared):
        nxt = TIERS[tier_rank(current) + 1]
    return {
        "persona": persona.name,
        "at": format_time(now),
        "since": format_time(start),
        "window": _promotion(persona).window,
        "autonomy_tier": declared,
        "rollout_policy": {
            "mode": persona.rollout_policy.mode,
            "percentage": persona.rollout_policy.percentage,
            "cohorts": list(persona.rollout_policy.cohorts),
        },
        "standing": evidence.standing,
        "tiers_now": arm_tiers(persona, evidence.standing),
        "arms": [
            {"arm": arm, "tier": tier, **summarize(_sum(group))}
            for (arm, tier), group in sorted(
                arms.items(), key=lambda kv: (kv[0][0], tier_rank_safe(kv[0][1]))
            )
        ],
        "cohorts": [
            {"cohort": cohort or None, **summarize(_sum(group))}
            for cohort, group in sorted(cohorts.items())
        ],
        "total": summarize(_sum(rows)),
        "pending_outcomes": len(evidence.pending),
        "disagreement_streak": evidence.streak,
        "promotion": {
            "criteria": None
            if crit is None
            else {
                "min_runs": crit.min_runs,
                "min_agreement": crit.min_agreement,
                "max_denials_per_run": crit.max_denials_per_run,
                "max_cost_per_run": crit.max_cost_per_run,
                "window": crit.window,
                "max_disagreement_streak": crit.max_disagreement_streak,
            },
            "epoch": evidence.epoch,
            "checks": [c.to_dict() for c in checks],
            "eligible": bool(checks) and all(c.ok for c in checks) and nxt is not None,
            "current_tier": current,
            "next_tier": nxt,
        },
        "history": evidence.history[-10:],
    }


def tier_rank_safe(tier: str) -> int:
    return TIERS.index(tier) if tier in TIERS else len(TIERS)


def promote(
    runtime: PersonaRuntime,
    persona: Persona,
    to: str,
    *,
    at: datetime,
    by: str | None = None,
) -> dict[str, Any]:
    """Append ``persona.autonomy.promoted`` if the receipts meet the criteria (else raise)."""
    if to not in TIERS:
        raise PromotionError(
            f"unknown autonomy tier {to!r}; expected one of {', '.join(TIERS)}", kind="bad_input"
        )
    declared = persona.autonomy_tier.value
    if tier_rank(to) > tier_rank(declared):
        raise PromotionError(
            f"{persona.name}: cannot promote to {to}: the manifest's autonomy_tier is "
            f"{declared}, and a promotion never goes above it"
        )
    crit = persona.rollout_policy.promotion
    if crit is None or not crit.declared:
        raise PromotionError(
            f"{persona.name}: rollout_policy.promotion declares no criteria, so there is "
            f"nothing to judge the receipts by; add [rollout_policy.promotion] (min_runs, "
            f"min_agreement, ...) to the manifest"
        )

    def body(batch: Batch) -> dict[str, Any]:
        evidence, _ = ev.load_txn(batch.txn, persona.name)
        current = capped_tier(persona, evidence.standing)
        if current is None:
            raise PromotionError(
                f"{persona.name}: rollout_policy.mode is {persona.rollout_policy.mode or 'unset'}; "
                f"its work already runs at autonomy_tier {declared}"
            )
        if tier_rank(to) <= tier_rank(current):
            raise PromotionError(
                f"{persona.name}: already runs at {current}; promote --to a higher tier "
                f"(at most {declared})"
            )
        checks = evaluate(persona, evidence, at)
        failed = [c for c in checks if not c.ok]
        if failed:
            raise PromotionError(
                f"{persona.name}: not promoted to {to}; the receipts do not meet: "
                + "; ".join(c.describe() for c in failed),
                details={"checks": [c.to_dict() for c in checks]},
            )
        payload = {
            "from": current,
            "to": to,
            "by": by,
            "reason": "promotion criteria met",
            "evidence": {
                "since": format_time(window_start(persona, at)),
                "epoch": evidence.epoch,
                "last_event_id": evidence.last_event_id,
                "checks": [c.to_dict() for c in checks],
            },
        }
        event = batch.emit(persona.name, RunKind.AUTONOMY_PROMOTED, payload)
        return {"event_id": event.event_id, **payload}

    return runtime.transact(at, body)


def _breach(persona: Persona, evidence: ev.Evidence, now: datetime) -> str | None:
    crit = persona.rollout_policy.promotion
    if crit is None or not crit.declared:
        return None
    c = _sum(evidence.window(window_start(persona, now), epoch=evidence.epoch))
    runs = c["runs"]
    last = evidence.last_run or {}
    if crit.max_denials_per_run is not None:
        spike = max(1.0, 5 * crit.max_denials_per_run)
        if last.get("denials", 0) > spike:
            return (
                f"denial spike: run {last.get('run_id')} had {last['denials']} policy denials "
                f"(more than {spike:g}, 5 x max_denials_per_run)"
            )
        if runs >= 3 and c["denials"] / runs > crit.max_denials_per_run:
            return (
                f"denials per run {c['denials'] / runs:.2f} over {int(runs)} runs exceeds "
                f"max_denials_per_run {crit.max_denials_per_run:g}"
            )
    if crit.max_cost_per_run is not None:
        if last.get("status") == "budget_exhausted":
            return f"budget overrun: run {last.get('run_id')} was stopped by its budget"
        if runs >= 3 and c["cost_usd"] / runs > crit.max_cost_per_run:
            return (
                f"cost per run ${c['cost_usd'] / runs:.4f} over {int(runs)} runs exceeds "
                f"max_cost_per_run ${crit.max_cost_per_run:g}"
            )
    if evidence.streak >= crit.max_disagreement_streak:
        return (
            f"disagreement streak: the last {evidence.streak} outcomes disagreed with the "
            f"proposals (max_disagreement_streak {crit.max_disagreement_streak})"
        )
    return None


def _demote_in(
    batch: Batch, persona: Persona, evidence: ev.Evidence, tier: str | None
) -> dict[str, Any] | None:
    """Demote one step below ``tier`` (the tier the breaching work ran at), every arm."""
    if tier not in TIERS or tier == SHADOW:
        return None
    reason = _breach(persona, evidence, batch.at)
    if reason is None:
        return None
    to = TIERS[tier_rank(tier) - 1]
    payload = {"from": tier, "to": to, "by": "charter", "reason": reason}
    event = batch.emit(persona.name, RunKind.AUTONOMY_DEMOTED, payload)
    evidence.apply(event)
    return {"event_id": event.event_id, **payload}


def check_demotion(
    runtime: PersonaRuntime, persona: Persona, at: datetime
) -> dict[str, Any] | None:
    """After a run: demote one tier if a criterion is breached in the window."""
    if persona.rollout_policy.promotion is None:
        return None

    def body(batch: Batch) -> dict[str, Any] | None:
        evidence, folded = ev.load_txn(batch.txn, persona.name)
        tier = (evidence.last_run or {}).get("tier")
        out = _demote_in(batch, persona, evidence, tier)
        if out is None and folded > 32:
            ev.save_txn(batch.txn, evidence)  # keep the tail short for the next run
        return out

    return runtime.transact(at, body)


def _agreement_payload(
    pending: Mapping[str, Any], work_key: str, outcome: str, source: str, **extra: Any
) -> dict[str, Any]:
    return {
        "run_id": pending["run_id"],
        "work_key": work_key,
        "predicted": pending.get("predicted"),
        "outcome": outcome,
        "agree": pending.get("predicted") == outcome,
        "source": source,
        "run_day": pending["day"],
        "epoch": pending["epoch"],
        "arm": pending["arm"],
        "tier": pending["tier"],
        "cohort": pending.get("cohort") or None,
        "cost_usd": pending.get("cost_usd", 0.0),
        "proposed_at": pending.get("at"),
        **extra,
    }


def observe_trigger(
    runtime: PersonaRuntime,
    personas: list[Persona],
    *,
    provider: str,
    kind: str | None,
    metadata: Mapping[str, str] | None,
    payload: Mapping[str, Any] | None,
    at: datetime,
) -> list[dict[str, Any]]:
    """A trigger that reports an outcome: record agreement for every pending proposal on its key."""
    try:
        normalized = normalize_trigger(provider, kind, metadata, payload=payload)
    except TriggerError:
        return []
    outcome = outcome_from_trigger(
        normalized.provider, normalized.kind, normalized.metadata, payload
    )
    if outcome is None:
        return []
    # outcomes settle the newest proposal about the same subject (the pull request, the
    # issue): proposals are keyed finer (a pull request's head, issue 31)
    subject = subject_of(normalized.work_key)
    recorded: list[dict[str, Any]] = []
    for persona in personas:
        if persona.name not in runtime.personas:
            continue
        if _settles(ev.load(runtime.log, persona.name).pending, subject) is None:
            continue  # a read first: most triggers settle nothing, so take no write lock

        def body(batch: Batch, persona: Persona = persona) -> list[dict[str, Any]]:
            evidence, _ = ev.load_txn(batch.txn, persona.name)
            key = _settles(evidence.pending, subject)
            pending = evidence.pending.get(key) if key is not None else None
            if key is None or pending is None:
                return []
            data = _agreement_payload(
                pending, key, outcome, "webhook", trigger=f"{normalized.provider}.{normalized.kind}"
            )
            event = batch.emit(persona.name, RunKind.AGREEMENT_RECORDED, data)
            evidence.apply(event)
            out = [{"persona": persona.name, "event_id": event.event_id, **data}]
            demoted = _demote_in(batch, persona, evidence, pending["tier"])
            if demoted:
                out.append({"persona": persona.name, "demoted": demoted})
            return out

        recorded.extend(runtime.transact(at, body))
    return recorded


def _settles(pending: Mapping[str, Any], subject: str) -> str | None:
    """The newest pending proposal's work key about ``subject``."""
    found = None
    for key in pending:  # (oldest first)
        if subject_of(key) == subject:
            found = key
    return found


def feedback(
    runtime: PersonaRuntime,
    log: EventLog,
    persona: Persona,
    run_id: str,
    *,
    agree: bool,
    at: datetime,
    note: str | None = None,
    by: str | None = None,
) -> dict[str, Any]:
    """``charter persona feedback RUN --agree/--disagree``: a person's verdict on a proposal."""
    record: Mapping[str, Any] | None = None
    day = ""
    for event in log.iter_all(persona=persona.name):
        if event.kind == RunKind.RUN_RECORDED and event.payload.get("run_id") == run_id:
            record = event.payload.get("record") or {}
            day = event.occurred_at.strftime("%Y-%m-%d")
        elif event.kind == RunKind.AGREEMENT_RECORDED and event.payload.get("run_id") == run_id:
            raise PromotionError(
                f"{persona.name}: run {run_id} already has an agreement "
                f"({'agreed' if event.payload.get('agree') else 'disagreed'}, "
                f"source {event.payload.get('source')}, event {event.event_id})"
            )
    if record is None:
        raise PromotionError(
            f"{persona.name}: no recorded run {run_id!r} (see charter persona inspect)",
            kind="not_found",
        )

    def body(batch: Batch) -> dict[str, Any]:
        evidence, _ = ev.load_txn(batch.txn, persona.name)
        autonomy = record.get("autonomy") or {}
        work_key = str(record.get("work_key") or "")
        pending = evidence.pending.get(work_key)
        if pending is None or pending.get("run_id") != run_id:
            pending = {
                "run_id": run_id,
                "predicted": None,
                "day": day,
                "epoch": evidence.epoch,
                "arm": str(autonomy.get("arm") or "outside"),
                "tier": str(autonomy.get("effective") or "unknown"),
                "cohort": (autonomy.get("rollout") or {}).get("cohort"),
                "cost_usd": float((record.get("budget") or {}).get("run_usd") or 0.0),
            }
        data = _agreement_payload(
            pending, work_key, "agreed" if agree else "disagreed", "feedback", by=by, note=note
        )
        data["agree"] = agree
        event = batch.emit(persona.name, RunKind.AGREEMENT_RECORDED, data)
        evidence.apply(event)
        out = {"event_id": event.event_id, **data}
        demoted = _demote_in(batch, persona, evidence, pending["tier"])
        if demoted:
            out["demoted"] = demoted
        return out

    return runtime.transact(at, body)


def standing(log: EventLog, persona: str) -> dict[str, Any] | None:
    """The persona's current promotion/demotion standing (``None``: the manifest's)."""
    return ev.load(log, persona).standing


__all__ = [
    "Check",
    "PromotionError",
    "arm_tiers",
    "capped_tier",
    "check_demotion",
    "evaluate",
    "feedback",
    "observe_trigger",
    "promote",
    "report",
    "standing",
    "summarize",
    "wilson",
]


def rollout_status(persona: Persona, log: EventLog) -> dict[str, Any]:
    """The rollout part of ``charter persona status``: standing, tiers and the last arm."""
    evidence = ev.load(log, persona.name)
    last = evidence.last_run
    return {
        "mode": persona.rollout_policy.mode,
        "standing": evidence.standing,
        "tiers_now": arm_tiers(persona, evidence.standing),
        "last_run": None
        if last is None
        else {k: last.get(k) for k in ("run_id", "arm", "tier", "cohort", "at")},
        "pending_outcomes": len(evidence.pending),
        "disagreement_streak": evidence.streak,
    }
