"""Shared data for the runtime tests (a uniquely named module: conftest names collide)."""

from __future__ import annotations

from datetime import UTC, datetime

from charter.runtime import BudgetSpec, PersonaRuntimeSpec

AT0 = datetime(2026, 4, 24, 12, 30, tzinfo=UTC)


def make_specs() -> list[PersonaRuntimeSpec]:
    return [
        PersonaRuntimeSpec(
            "merge_captain",
            "0.1.0",
            triggers=("github.pr_opened", "github.check_failed"),
            schedules=("*/30 * * * *", "0 9 * * 1"),
            budget=BudgetSpec(daily_usd=1.0, hourly_usd=0.5, run_usd=0.3, max_tokens=1000),
            handoffs=("review_captain",),
        ),
        PersonaRuntimeSpec("review_captain", "0.2.0", triggers=("slack.message",)),
        PersonaRuntimeSpec("wide", max_concurrency=2, triggers=("webhook.*",)),
    ]
