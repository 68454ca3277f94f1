"""``rollout_policy``: cohorts, the promotion window, and the checks seed 003 leaves to us.

A cohort is either a filter or a name:

- ``KEY:VALUE`` on the metadata of the work's trigger (``repository:org/repo``,
  ``label:bug``, ``author:alice``, ``channel:C0123``). It must name a key that one of the
  persona's triggers produces: a cohort nothing can match would silently put no work in
  the rollout.
- a bare name (``merge-captain-v1``, as harn writes them): a *named cohort*. Work belongs
  to it when its trigger metadata says ``cohort=merge-captain-v1``; and when a persona's
  cohorts are all names, work whose metadata names no cohort belongs to the first of them
  (the names label the persona's rollout, so the percentage alone selects). Work whose
  metadata names another cohort is outside. See :func:`matching_cohort`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from .errors import Collector, join
from .model import RolloutPolicy
from .syntax import TriggerName

if TYPE_CHECKING:
    from .workflow_model import Promotion

#: Metadata keys each provider's triggers produce (charter.run.rollout.cohort_values).
COHORT_KEYS: dict[str, tuple[str, ...]] = {
    "github": ("repository", "owner", "label", "author", "base", "action"),
    "linear": ("team", "label", "assignee", "project", "action"),
    "slack": ("channel", "team", "user"),
    "pagerduty": ("service", "urgency", "priority"),
}

#: The metadata key that names a work's cohort (``--metadata cohort=merge-captain-v1``).
COHORT_KEY = "cohort"
_COHORT_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@/+-]*$")

_WINDOW_RE = re.compile(r"^\s*(\d+)\s*([hdw])\s*$")
_WINDOW_UNITS = {"h": "hours", "d": "days", "w": "weeks"}


def parse_window(text: str) -> timedelta:
    """``30d`` / ``12h`` / ``2w`` -> a timedelta; ``ValueError`` naming the form otherwise."""
    m = _WINDOW_RE.match(text)
    if not m or int(m[1]) == 0:
        raise ValueError(f"expected a positive duration such as 30d, 12h or 2w, got {text!r}")
    return timedelta(**{_WINDOW_UNITS[m[2]]: int(m[1])})


def parse_cohort(text: str) -> tuple[str, str]:
    """``KEY:VALUE`` -> ``(key, value)``; a named cohort ``NAME`` -> ``("cohort", NAME)``;
    ``ValueError`` otherwise."""
    key, sep, value = text.partition(":")
    key, value = key.strip().lower(), value.strip()
    if not sep:
        name = text.strip()
        if _COHORT_NAME_RE.match(name):
            return COHORT_KEY, name
        raise ValueError(
            f"expected a cohort name (letters, digits, '-', '_', '.', e.g. merge-captain-v1) "
            f"or KEY:VALUE on trigger metadata (e.g. repository:org/repo, label:bug), "
            f"got {text!r}"
        )
    if not key or not value:
        raise ValueError(
            f"expected KEY:VALUE on trigger metadata (e.g. repository:org/repo, label:bug) "
            f"or a cohort name (e.g. merge-captain-v1), got {text!r}"
        )
    return key, value


def matching_cohort(cohorts: Iterable[str], values: Mapping[str, Iterable[str]]) -> str | None:
    """The first cohort this work belongs to, given its trigger metadata ``values``
    (every value each key takes; compared case-insensitively).

    A filter ``KEY:VALUE`` matches a value of KEY; a named cohort matches
    ``cohort=NAME``. When every cohort is named and the work names none, it belongs to
    the first (the names label the persona's rollout).
    """
    cohorts = list(cohorts)
    for cohort in cohorts:
        key, wanted = parse_cohort(cohort)
        if any(v.lower() == wanted.lower() for v in values.get(key, ())):
            return cohort
    named_only = bool(cohorts) and all(":" not in c for c in cohorts)
    if named_only and not any(values.get(COHORT_KEY, ())):
        return cohorts[0]
    return None


def cohort_keys(triggers: Iterable[TriggerName]) -> tuple[set[str], bool]:
    """Keys the triggers produce, and whether any trigger is of an unknown provider
    (whose metadata charter cannot know, so any key is accepted)."""
    keys: set[str] = set()
    open_ended = False
    for trigger in triggers:
        known = COHORT_KEYS.get(trigger.provider)
        if known is None:
            open_ended = True
        else:
            keys.update(known)
    return keys, open_ended


def build_rollout(
    checked: Mapping[str, Any],
    triggers: Iterable[TriggerName],
    path: str,
    col: Collector,
) -> RolloutPolicy:
    """The validated :class:`RolloutPolicy` (problems recorded in ``col``)."""
    triggers = list(triggers)
    cohorts: list[str] = []
    declared = checked.get("cohorts", ())
    keys, open_ended = cohort_keys(triggers) if declared else (set(), False)
    for i, raw in declared:
        item = join(join(path, "cohorts"), i)
        try:
            key, _ = parse_cohort(raw)
        except ValueError as exc:
            col.add(item, str(exc))
            continue
        if key == COHORT_KEY:
            # a named cohort (or cohort:NAME): any work can name it, scheduled work too
            cohorts.append(raw)
            continue
        if not triggers:
            col.add(
                item,
                f"cohort {raw!r} selects work by trigger metadata, but the persona declares "
                f"no triggers (scheduled and manual work carries none)",
            )
        elif key not in keys and not open_ended:
            names = ", ".join(sorted(str(t) for t in triggers))
            col.add(
                item,
                f"cohort key {key!r} is not produced by the persona's triggers ({names}); "
                f"expected one of {', '.join(sorted(keys))}",
            )
        cohorts.append(raw)
    promotion: Promotion | None = None
    if "promotion" in checked:
        from .workflow_model import Promotion  # loaded only when a persona declares one

        spec = dict(checked["promotion"])
        window = spec.get("window", "30d")
        try:
            parse_window(window)
        except ValueError as exc:
            col.add(join(join(path, "promotion"), "window"), str(exc))
            spec.pop("window", None)
        promotion = Promotion(**spec)
        if not promotion.declared:
            col.add(
                join(path, "promotion"),
                "no criterion set; expected at least one of min_runs, min_agreement, "
                "max_denials_per_run, max_cost_per_run",
            )
    return RolloutPolicy(checked.get("mode"), checked.get("percentage"), tuple(cohorts), promotion)


__all__ = [
    "COHORT_KEY",
    "COHORT_KEYS",
    "build_rollout",
    "cohort_keys",
    "matching_cohort",
    "parse_cohort",
    "parse_window",
]
