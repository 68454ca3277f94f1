"""The same run, approval and receipts on the PostgreSQL backend (``--state URL``)."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from charter.runtime import EventLogError, PostgresEventLog

from .conftest import AT, charter_argv, envelope, executed, invoke

PG_BASE_URL = os.environ.get("CHARTER_TEST_PG_URL", "postgresql://127.0.0.1:5432/test")
MERGE = {"calls": [{"tool": "github", "args": {"action": "merge", "pr": 7}, "stage": "act"}]}


@pytest.fixture
def pg_url() -> Iterator[str]:
    url = f"{PG_BASE_URL}?schema=charter_run_{uuid.uuid4().hex[:12]}"
    try:
        probe = PostgresEventLog(url)
    except EventLogError as exc:
        message = f"PostgreSQL at {PG_BASE_URL} is unreachable: {exc}"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message + " (run `make services`)")
    try:
        yield url
    finally:
        probe.drop_schema()
        probe.close()


def test_approval_across_processes_on_postgres(
    make_pack: Callable[..., Path], tmp_path: Path, pg_url: str
) -> None:
    pack = make_pack()
    argv = charter_argv(
        "persona", "run", "actor", "--tier", "act_with_approval", "--no-input",
        "--payload", str(envelope(tmp_path / "e.json", MERGE)), "--json", "--at", AT,
        "--manifest", str(pack), "--state", pg_url,
    )  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pending: list[dict[str, str]] = []
        for _ in range(600):
            listing = invoke(["approve", "--json", "--state", pg_url])
            pending = json.loads(listing.stdout)["pending"]
            if pending:
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        (item,) = pending
        granted = invoke(
            ["approve", item["run_id"], item["call_id"], "--at", AT, "--state", pg_url]
        )
        assert granted.exit_code == 0, granted.output
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    data = json.loads(out)
    assert data["status"] == "completed" and data["approvals"][0]["status"] == "granted"
    assert executed(pack) == [{"action": "merge", "pr": 7}]
    assert [r["kind"] for r in data["receipts"]] == [
        "persona.tool.executing",
        "persona.tool.executed",
    ]
