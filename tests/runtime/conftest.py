"""Shared fixtures: every runtime test that takes ``log`` runs on SQLite and PostgreSQL.

PostgreSQL tests use a fresh schema per test (dropped afterwards) so runs can proceed in
parallel. If the server is unreachable they fail under ``CI=true`` and are skipped with
the reason otherwise (``make test`` starts the server first).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from runtime_support import AT0, make_specs, pg_unreachable, pg_url  # noqa: F401  (AT0 re-exported)

from charter.runtime import (
    EventLog,
    EventLogError,
    HandoffRoute,
    PersonaRuntime,
    PostgresEventLog,
    SqliteEventLog,
)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def state_location(backend: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    """Where a test's state lives: ``{"state_dir": ...}`` or ``{"url": ...}``."""
    if backend == "sqlite":
        yield {"state_dir": str(tmp_path / "state")}
        return
    url = pg_url()
    try:
        probe = PostgresEventLog(url)
    except EventLogError as exc:
        pg_unreachable(exc)
        raise
    try:
        yield {"url": url}
    finally:
        probe.drop_schema()
        probe.close()


def open_log(location: dict[str, str]) -> EventLog:
    if "url" in location:
        return PostgresEventLog(location["url"])
    return SqliteEventLog(location["state_dir"])


@pytest.fixture
def log_factory(state_location: dict[str, str]) -> Callable[[], EventLog]:
    """Opens another connection to the test's state (as another process would)."""
    return lambda: open_log(state_location)


@pytest.fixture
def log(state_location: dict[str, str]) -> Iterator[EventLog]:
    opened = open_log(state_location)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def runtime(log: EventLog) -> PersonaRuntime:
    routes = [
        HandoffRoute.from_mapping(
            {
                "id": "merge-receipt",
                "kind": "merge_receipt",
                "from": "merge_captain",
                "route": [
                    {"target": "review_captain", "when": "approval_denied"},
                    {"target": "human:maintainers", "when": "budget_exhausted"},
                    {"target": "persona://review_captain", "when": "always"},
                ],
            }
        )
    ]
    return PersonaRuntime(log, make_specs(), routes=routes, holder="test-host")
