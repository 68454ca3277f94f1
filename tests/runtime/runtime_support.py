"""Shared data for the runtime tests (a uniquely named module: conftest names collide)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import pytest

from charter.runtime import BudgetSpec, EventLogError, PersonaRuntimeSpec, PostgresEventLog

AT0 = datetime(2026, 4, 24, 12, 30, tzinfo=UTC)
PG_BASE_URL = os.environ.get("CHARTER_TEST_PG_URL", "postgresql://127.0.0.1:5432/test")


def pg_url() -> str:
    """A URL of a fresh schema on the test server."""
    return f"{PG_BASE_URL}?schema=charter_t_{uuid.uuid4().hex[:12]}"


def pg_unreachable(exc: Exception) -> None:
    """Fail under ``CI=true``, skip with the reason otherwise."""
    message = f"PostgreSQL at {PG_BASE_URL} is unreachable: {exc}"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message)
    pytest.skip(message + " (run `make services`)")


@contextmanager
def new_pg_log() -> Iterator[PostgresEventLog]:
    """A PostgreSQL log on a fresh schema, dropped afterwards."""
    try:
        log = PostgresEventLog(pg_url())
    except EventLogError as exc:
        pg_unreachable(exc)
        raise
    try:
        yield log
    finally:
        log.drop_schema()
        log.close()


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
