"""Budgets that hold during a run: a worst-case reservation before every model call.

Before each call the run reserves ``estimated input + max output`` tokens at the model's
price and checks it, with what this run and the persona's current hour/day have already
spent, against ``run_usd``, ``hourly_usd``, ``daily_usd`` and ``max_tokens`` (tokens per
UTC day, as the runtime counts them); ``max_runtime_seconds`` is a deadline. Reaching a
cap exactly is allowed; crossing it stops the run with ``budget_exhausted``. After the
call the actual usage is charged.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from charter.agent import LlmRequest, LlmResponse
from charter.errors import CharterError
from charter.manifest import Budget

from .errors import PricingError
from .prices import ModelPrice, PriceTable


@dataclass(frozen=True)
class BudgetStop:
    """Why a run stopped: the cap, its limit, what was spent and what was requested."""

    reason: str  # run_usd | hourly_usd | daily_usd | max_tokens | max_runtime_seconds
    limit: float
    spent: float
    requested: float
    window: str

    @property
    def message(self) -> str:
        return (
            f"budget exhausted: {self.reason} (limit {self.limit:g}, spent {self.spent:g}, "
            f"requested {self.requested:g})"
        )

    def to_payload(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "limit": self.limit,
            "spent": self.spent,
            "requested": self.requested,
            "window": self.window,
            "message": self.message,
        }


class BudgetExceeded(CharterError):
    def __init__(self, stop: BudgetStop) -> None:
        super().__init__(stop.message)
        self.stop = stop


def estimate_tokens(request: LlmRequest) -> int:
    """A generous estimate of a request's input tokens (4 characters per token)."""
    chars = len(request.system or "")
    chars += len(json.dumps(request.messages, default=str))
    if request.tools:
        chars += len(json.dumps(request.tools, default=str))
    return chars // 4 + 1


@dataclass
class LiveBudget:
    """One run's spend against the persona's caps."""

    budget: Budget
    prices: PriceTable
    hour_usd: float = 0.0  # spent by the persona in the current UTC hour before this run
    day_usd: float = 0.0
    day_tokens: int = 0
    hour_window: str = ""
    day_window: str = ""
    elapsed: Callable[[], float] = field(default=lambda: 0.0)
    run_usd: float = 0.0
    run_tokens: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    by_model: dict[str, dict[str, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def _price(self, model: str | None) -> ModelPrice | None:
        price = self.prices.price(model)
        if price is None:
            message = f"model {model or '(none)'!r} has no price in [pricing]"
            if self.prices.strict:
                raise PricingError(message + " (strict mode)")
            note = message + "; its cost counts as 0"
            if note not in self.warnings:
                self.warnings.append(note)
        return price

    def check_deadline(self) -> None:
        limit = self.budget.max_runtime_seconds
        if limit is None:
            return
        elapsed = self.elapsed()
        if elapsed >= limit:
            raise BudgetExceeded(
                BudgetStop("max_runtime_seconds", float(limit), round(elapsed, 3), 0.0, "run")
            )

    def reserve(self, model: str | None, request: LlmRequest) -> dict[str, Any]:
        """Check the worst case of ``request`` against every cap; raise if one would break."""
        self.check_deadline()
        price = self._price(model)
        est_in = estimate_tokens(request)
        raw_max = request.options.get("max_tokens") if request.options else None
        max_out = (
            int(raw_max)
            if isinstance(raw_max, int) and raw_max > 0
            else self.prices.default_max_output_tokens
        )
        usd = price.cost(est_in, max_out) if price else 0.0
        tokens = est_in + max_out
        b = self.budget
        if b.run_usd is not None and self.run_usd + usd > b.run_usd:
            raise BudgetExceeded(BudgetStop("run_usd", b.run_usd, self.run_usd, usd, "run"))
        hour = self.hour_usd + self.run_usd
        if b.hourly_usd is not None and hour + usd > b.hourly_usd:
            raise BudgetExceeded(
                BudgetStop("hourly_usd", b.hourly_usd, hour, usd, f"hour:{self.hour_window}")
            )
        day = self.day_usd + self.run_usd
        if b.daily_usd is not None and day + usd > b.daily_usd:
            raise BudgetExceeded(
                BudgetStop("daily_usd", b.daily_usd, day, usd, f"day:{self.day_window}")
            )
        day_tokens = self.day_tokens + self.run_tokens
        if b.max_tokens is not None and day_tokens + tokens > b.max_tokens:
            raise BudgetExceeded(
                BudgetStop(
                    "max_tokens", float(b.max_tokens), day_tokens, tokens, f"day:{self.day_window}"
                )
            )
        return {
            "model": model,
            "estimated_input_tokens": est_in,
            "max_output_tokens": max_out,
            "reserved_usd": round(usd, 9),
            "reserved_tokens": tokens,
            "priced": price is not None,
            "run_usd_before": round(self.run_usd, 9),
            "run_tokens_before": self.run_tokens,
        }

    def charge(self, model: str | None, response: LlmResponse) -> dict[str, Any]:
        """Record a call's actual usage; returns the usage entry."""
        price = self.prices.price(model)
        cost = price.cost(response.input_tokens, response.output_tokens) if price else 0.0
        tokens = response.input_tokens + response.output_tokens
        self.run_usd = round(self.run_usd + cost, 9)
        self.run_tokens += tokens
        self.input_tokens += response.input_tokens
        self.output_tokens += response.output_tokens
        self.calls += 1
        key = model or "(none)"
        entry = self.by_model.setdefault(
            key, {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
        )
        entry["calls"] += 1
        entry["input_tokens"] += response.input_tokens
        entry["output_tokens"] += response.output_tokens
        entry["cost_usd"] = round(entry["cost_usd"] + cost, 9)
        return {
            "model": model,
            "input_tokens": response.input_tokens,
            "output_tokens": response.output_tokens,
            "cost_usd": round(cost, 9),
            "priced": price is not None,
            "run_usd": self.run_usd,
            "run_tokens": self.run_tokens,
        }

    def to_dict(self) -> dict[str, Any]:
        b = self.budget
        return {
            "limits": {
                "run_usd": b.run_usd,
                "hourly_usd": b.hourly_usd,
                "daily_usd": b.daily_usd,
                "max_tokens": b.max_tokens,
                "max_runtime_seconds": b.max_runtime_seconds,
                "frontier_escalations": b.frontier_escalations,
            },
            "run_usd": self.run_usd,
            "run_tokens": self.run_tokens,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "model_calls": self.calls,
            "by_model": self.by_model,
        }


__all__ = ["BudgetExceeded", "BudgetStop", "LiveBudget", "estimate_tokens"]
