"""Cron expressions, checked by cronsim (small, strict, maintained)."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache

#: Non-standard macros people write anyway; expanded before parsing.
MACROS: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_EPOCH = datetime(2026, 1, 1)


def expand(expr: str) -> str:
    """The five-field form of ``expr`` (macros expanded, whitespace normalised)."""
    text = " ".join(expr.split())
    return MACROS.get(text.lower(), text)


@lru_cache(maxsize=4096)  # manifests repeat the same few expressions
def cron_error(expr: str) -> str | None:
    """An error message when ``expr`` is not a valid five-field cron expression."""
    from cronsim import CronSim, CronSimError  # only manifests with cron triggers need it

    try:
        CronSim(expand(expr), _EPOCH)
    except CronSimError as exc:
        return f"invalid cron expression {expr!r}: {exc}"
    except Exception as exc:  # cronsim is strict but not total on garbage input
        return f"invalid cron expression {expr!r}: {exc}"
    return None


def next_fire(expr: str, after: datetime) -> datetime:
    """The first time strictly after ``after`` that ``expr`` fires (expression must be valid)."""
    from cronsim import CronSim

    return next(CronSim(expand(expr), after))
