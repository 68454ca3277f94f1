"""Which arm of a persona's rollout one unit of work falls in.

``rollout_policy.percentage`` and ``cohorts`` select the work that runs under the rollout
mode; the rest runs under the persona's own tier (seed 003, issue 18). Selection is a
pure function of the work key and the trigger's metadata, so every replica and every
retry of the same work lands in the same arm:

- the bucket is ``sha256(work_key)`` into 100 buckets; work is in the rollout when its
  bucket is below ``percentage`` (no percentage: all work);
- with cohorts, the work must also match one (``KEY:VALUE`` on the trigger metadata, or a
  named cohort: ``cohort=NAME`` in the metadata, or any work when all cohorts are names).

``canary`` reads the other way round: the selected work is the canary and runs at the
declared tier, the rest stays in shadow. Either way, the arm whose tier the rollout mode
caps is the one a promotion raises (:mod:`charter.run.promotion`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from charter.manifest import RolloutPolicy
from charter.manifest.rollout import matching_cohort as _matching_cohort
from charter.runtime.triggers import subject_of

from .outcomes import dig

ROLLOUT = "rollout"
OUTSIDE = "outside"


def work_bucket(work_key: str) -> int:
    """The work key's stable bucket, 0..99, by its subject (``subject_of``): every head,
    review and comment of one pull request falls in the same arm (issue 31 keyed them
    apart)."""
    digest = hashlib.sha256(subject_of(work_key).encode()).digest()
    return int.from_bytes(digest[:8], "big") % 100


def _names(items: Any, *path: str) -> list[str]:
    out: list[str] = []
    if not isinstance(items, list):
        return out
    for item in items:
        value: Any = item
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if isinstance(value, str) and value:
            out.append(value)
    return out


def cohort_values(
    provider: str | None,
    metadata: Mapping[str, str] | None,
    payload: Mapping[str, Any] | None = None,
) -> dict[str, set[str]]:
    """Every value each cohort key takes for this work (a PR has many labels)."""
    values: dict[str, set[str]] = {}

    def add(key: str, *found: Any) -> None:
        for value in found:
            if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
                values.setdefault(key, set()).add(str(value))

    for key, value in (metadata or {}).items():
        add(str(key).lower(), value)
        if str(key).lower() == "labels":
            add("label", *(v.strip() for v in str(value).split(",")))
    body = payload if isinstance(payload, Mapping) else {}
    kind = (provider or "").lower()
    if kind == "github":
        repo = dig(body, "repository", "full_name")
        add("repository", repo)
        if isinstance(repo, str) and "/" in repo:
            add("owner", repo.split("/", 1)[0])
        elif "repository" in values:
            add("owner", *(r.split("/", 1)[0] for r in values["repository"] if "/" in r))
        subject = dig(body, "pull_request") or dig(body, "issue")
        add("label", *_names(dig(subject, "labels"), "name"))
        add("author", dig(subject, "user", "login"))
        add("base", dig(body, "pull_request", "base", "ref"))
        add("action", dig(body, "action"))
    elif kind == "linear":
        data = dig(body, "data") or {}
        add("team", dig(data, "team", "key"))
        add("label", *_names(dig(data, "labels"), "name"))
        add("assignee", dig(data, "assignee", "name"))
        add("project", dig(data, "project", "name"))
        add("action", dig(body, "action"))
    elif kind == "slack":
        event = dig(body, "event") or body
        add("channel", dig(event, "channel"))
        add("user", dig(event, "user"))
        add("team", dig(body, "team_id"))
    elif kind == "pagerduty":
        data = dig(body, "event", "data") or {}
        add("service", dig(data, "service", "summary"))
        add("urgency", dig(data, "urgency"))
        add("priority", dig(data, "priority", "summary"))
    return values


def matching_cohort(cohorts: Iterable[str], values: Mapping[str, set[str]]) -> str | None:
    """The first cohort the work matches: ``KEY:VALUE`` filters and named cohorts, as
    :func:`charter.manifest.rollout.matching_cohort` defines them."""
    return _matching_cohort(cohorts, values)


@dataclass(frozen=True)
class RolloutArm:
    """The arm one unit of work runs in, and why."""

    arm: str  # "rollout" or "outside"
    bucket: int
    mode: str | None
    cohort: str | None
    capped: bool  # whether the rollout mode caps this arm's tier
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "arm": self.arm,
            "bucket": self.bucket,
            "mode": self.mode,
            "cohort": self.cohort,
            "capped": self.capped,
            "reason": self.reason,
        }


def select_arm(
    rollout: RolloutPolicy | None,
    work_key: str,
    values: Mapping[str, set[str]] | None = None,
) -> RolloutArm:
    """Deterministic arm of ``work_key`` (with the trigger's cohort ``values``)."""
    bucket = work_bucket(work_key)
    mode = rollout.mode if rollout is not None else None
    if rollout is None or mode in (None, "full"):
        return RolloutArm(OUTSIDE, bucket, mode, None, False, "no rollout in progress")
    percentage = 100.0 if rollout.percentage is None else rollout.percentage
    cohort: str | None = None
    if rollout.cohorts:
        cohort = matching_cohort(rollout.cohorts, values or {})
        if cohort is None:
            selected = False
            why = f"matches none of the cohorts {', '.join(rollout.cohorts)}"
        else:
            selected = bucket < percentage
            why = f"cohort {cohort}, bucket {bucket} {'<' if selected else '>='} {percentage:g}%"
    else:
        selected = bucket < percentage
        why = f"bucket {bucket} {'<' if selected else '>='} {percentage:g}%"
    arm = ROLLOUT if selected else OUTSIDE
    capped = (not selected) if mode == "canary" else selected
    return RolloutArm(arm, bucket, mode, cohort, capped, why)


__all__ = [
    "OUTSIDE",
    "ROLLOUT",
    "RolloutArm",
    "cohort_values",
    "matching_cohort",
    "select_arm",
    "work_bucket",
]
