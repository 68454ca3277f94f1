"""SQLite under concurrent writers: a busy lock is waited for and retried, never a crash."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from charter.runtime import EventLogError, NewEvent, SqliteEventLog
from charter.runtime.sqlite_log import DB_FILENAME

AT = datetime(2026, 4, 24, 12, tzinfo=UTC)


def _hold_write_lock(path: Path, seconds: float) -> threading.Thread:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("BEGIN IMMEDIATE")

    def release() -> None:
        time.sleep(seconds)
        conn.execute("COMMIT")
        conn.close()

    thread = threading.Thread(target=release)
    thread.start()
    return thread


def test_begin_is_retried_when_sqlite_returns_busy_at_once(tmp_path: Path) -> None:
    log = SqliteEventLog(tmp_path, busy_timeout_ms=5_000)
    # SQLite's own busy handler off: every BEGIN fails with "database is locked" at once,
    # so only the retry loop can get the write through once the holder lets go
    log._conn.execute("PRAGMA busy_timeout = 0")
    holder = _hold_write_lock(log.path, 0.3)
    started = time.monotonic()
    (event,) = log.append([NewEvent("p", "persona.test", AT, {})])
    assert time.monotonic() - started >= 0.25
    assert event.event_id == 1
    holder.join()
    log.close()


def test_a_new_state_opened_while_another_process_locks_it_waits(tmp_path: Path) -> None:
    """Processes opening a new state at once: switching it to WAL fails at once (SQLite's
    busy wait does not apply) while another holds a lock. Before, the second process
    answered "cannot open state ...: database is locked" (a CLI trigger in
    test_concurrent_cli_triggers_all_get_an_answer, now and then under load)."""
    path = tmp_path / DB_FILENAME
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE mine (x)")  # a new database, still in rollback journal mode
    holder = _hold_write_lock(path, 0.3)
    started = time.monotonic()
    log = SqliteEventLog(tmp_path, busy_timeout_ms=5_000)
    assert time.monotonic() - started >= 0.25
    assert log.append([NewEvent("p", "persona.test", AT, {})])[0].event_id == 1
    holder.join()
    log.close()
    other.close()


def test_a_lock_held_past_the_timeout_is_a_clear_error(tmp_path: Path) -> None:
    log = SqliteEventLog(tmp_path, busy_timeout_ms=200)
    holder = _hold_write_lock(log.path, 1.0)
    with pytest.raises(EventLogError, match=r"state is busy.*over 0.2 s"):
        log.append([NewEvent("p", "persona.test", AT, {})])
    holder.join()
    assert log.append([NewEvent("p", "persona.test", AT, {})])[0].event_id == 1
    log.close()


MANIFEST = """
[[personas]]
name = "p"
description = "x"
entry_workflow = "w.py:run"
triggers = ["github.pull_request"]
autonomy_tier = "act_auto"
receipt_policy = "optional"
tools = ["read"]
runtime = { max_concurrency = 2 }
"""


@pytest.mark.parametrize("writers", [4, 8])
def test_concurrent_cli_triggers_all_get_an_answer(tmp_path: Path, writers: int) -> None:
    (tmp_path / "charter.toml").write_text(MANIFEST)
    (tmp_path / "w.py").write_text("def run(ctx):\n    return {}\n")
    argv = [sys.executable, "-m", "charter", "persona", "trigger", "p", "--provider", "github",
            "--kind", "pull_request", "--metadata", "repository=o/r", "--hold", "--json",
            "--manifest", str(tmp_path), "--state-dir", str(tmp_path / "state")]  # fmt: skip
    procs = [
        subprocess.Popen(
            [*argv, "--metadata", f"number={n % 3}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(writers)
    ]
    answers = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert "locked" not in err and "Traceback" not in err, err
        answers.append(json.loads(out)["status"])
    # three keys, two leases: two start, the same key is busy, the third key queues
    assert answers.count("started") == 2
    assert set(answers) <= {"started", "lease_busy", "queued"}
    assert len(answers) == writers


def test_runtime_table_is_validated(tmp_path: Path) -> None:
    bad = MANIFEST.replace("max_concurrency = 2", "max_concurrency = 0, lease_ttl = 5")
    (tmp_path / "charter.toml").write_text(bad)
    (tmp_path / "w.py").write_text("def run(ctx):\n    return {}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "charter", "persona", "check", "--json", "--manifest",
         str(tmp_path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout  # check: 1 when the manifest has errors
    text = proc.stdout
    assert "personas[0].runtime.max_concurrency" in text
    assert "personas[0].runtime.lease_ttl" in text
