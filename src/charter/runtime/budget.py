"""Budget checks: run before any work is recorded."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .clock import day_window, hour_window
from .spec import BudgetSpec


@dataclass(frozen=True)
class BudgetRefusal:
    reason: str  # run_usd | hourly_usd | daily_usd | max_tokens
    limit: float
    spent: float
    requested: float
    window: str  # "run", "hour:2026-04-24T12", "day:2026-04-24"

    def to_payload(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "limit": self.limit,
            "spent": self.spent,
            "requested": self.requested,
            "window": self.window,
        }


def spent_in_windows(spend: dict[str, Any], at: datetime) -> tuple[float, float, int]:
    """(hour_usd, day_usd, day_tokens) as of ``at``: a rolled-over window counts as zero."""
    hour = spend["hour_usd"] if spend.get("hour") == hour_window(at) else 0.0
    same_day = spend.get("day") == day_window(at)
    day = spend["day_usd"] if same_day else 0.0
    tokens = spend["day_tokens"] if same_day else 0
    return float(hour), float(day), int(tokens)


def _over(limit: float, spent: float, requested: float) -> bool:
    # Exactly reaching a cap is allowed; once it is reached (and the cap is positive),
    # even zero-cost work is refused until the window rolls over.
    return spent + requested > limit or (limit > 0 and spent >= limit)


def check_budget(
    budget: BudgetSpec, spend: dict[str, Any], *, cost_usd: float, tokens: int, at: datetime
) -> BudgetRefusal | None:
    """The first cap ``cost_usd``/``tokens`` would break, checked run, hour, day, tokens."""
    hour_usd, day_usd, day_tokens = spent_in_windows(spend, at)
    if budget.run_usd is not None and cost_usd > budget.run_usd:
        return BudgetRefusal("run_usd", budget.run_usd, 0.0, cost_usd, "run")
    if budget.hourly_usd is not None and _over(budget.hourly_usd, hour_usd, cost_usd):
        return BudgetRefusal(
            "hourly_usd", budget.hourly_usd, hour_usd, cost_usd, f"hour:{hour_window(at)}"
        )
    if budget.daily_usd is not None and _over(budget.daily_usd, day_usd, cost_usd):
        return BudgetRefusal(
            "daily_usd", budget.daily_usd, day_usd, cost_usd, f"day:{day_window(at)}"
        )
    if budget.max_tokens is not None and _over(budget.max_tokens, day_tokens, tokens):
        return BudgetRefusal(
            "max_tokens", budget.max_tokens, day_tokens, tokens, f"day:{day_window(at)}"
        )
    return None


def exhaustion_active(exhaustion: dict[str, Any] | None, at: datetime) -> bool:
    """Whether a recorded exhaustion still applies at ``at`` (its window has not rolled)."""
    if not exhaustion:
        return False
    window = str(exhaustion.get("window") or "")
    if window.startswith("hour:"):
        return window == f"hour:{hour_window(at)}"
    if window.startswith("day:"):
        return window == f"day:{day_window(at)}"
    return True  # run_usd: until the next admitted run
