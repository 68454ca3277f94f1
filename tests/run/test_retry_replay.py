"""Runs that finish (issue 31): a replica killed mid-run leaves accepted work behind; its
lease expires and another replica takes the work up again from the dead run's journal.
The merge the dead run made is replayed from the log, not made again; work whose
attempts are used up is dead-lettered with its reasons, in ``status`` and the feed."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from charter.run.parking import UNDECIDED, journal_of
from charter.runtime import Event

from .conftest import executed, persona_toml
from .test_postgres import pg_url  # noqa: F401  (the fixture)
from .test_replicas_postgres import _hook, _kinds, _serve, _wait

MERGE = {"tool": "github", "args": {"action": "merge", "pr": 9}, "stage": "act"}
FAST = "runtime = { lease_ttl_seconds = 2, retry_backoff_seconds = 0.2, max_attempts = 2 }"


def _kill(proc: Any) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _wait_file(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def test_a_killed_replicas_run_is_finished_elsewhere_from_its_journal(
    make_pack: Callable[..., Path],
    pg_url: str,  # noqa: F811
) -> None:
    pack = make_pack(persona_toml(extra=FAST))
    plan = {"calls": [MERGE], "hang_after_calls": 300, "report_results": True}
    a, base_a = _serve(pack, pg_url)
    try:
        _hook(base_a, "w1", plan)
        _wait_file(pack / "hung")  # the merge happened; the run hangs after it
    finally:
        _kill(a)  # kill -9 mid-run: the lease stays until it expires
    assert executed(pack) == [{"action": "merge", "pr": 9}]
    b, _ = _serve(pack, pg_url)
    try:
        _wait(pg_url, lambda log: any(k == "persona.run.completed" for k, _ in log))
    finally:
        b.send_signal(signal.SIGTERM)
        b.communicate(timeout=60)
    log = _kinds(pg_url)
    # the merge was not made a second time: the retry replayed its recorded result
    assert executed(pack) == [{"action": "merge", "pr": 9}]
    [retried] = [p for k, p in log if k == "persona.work.retried"]
    assert retried["attempt"] == 2 and "expired" in retried["reason"]
    runs = [p["run_id"] for k, p in log if k == "persona.run.started"]
    [done] = [p for k, p in log if k == "persona.run.completed"]
    assert len(runs) == 2 and done["run_id"] == runs[1]
    replayed = json.loads((pack / f"results-{runs[1]}.json").read_text())
    assert replayed == [{"status": "ok", "action": "merge"}]
    executing = [p for k, p in log if k == "persona.tool.executing"]
    assert [p["run_id"] for p in executing] == [runs[0]]  # no second attempt at the call
    feed = [k for k, _ in log]
    assert feed.index("persona.lease.expired") < feed.index("persona.work.retried")


def test_work_that_keeps_dying_is_dead_lettered_with_its_reasons(
    make_pack: Callable[..., Path],
    pg_url: str,  # noqa: F811
) -> None:
    """max_attempts = 2: the second attempt dies too (its hang marker removed so it hangs
    again); the third replica finds the work used up and dead-letters it."""
    pack = make_pack(persona_toml(extra=FAST))
    plan = {"calls": [], "hang_after_calls": 300}
    a, base_a = _serve(pack, pg_url)
    try:
        _hook(base_a, "w2", plan)
        _wait_file(pack / "hung")
    finally:
        _kill(a)
    (pack / "hung").unlink()
    b, _ = _serve(pack, pg_url)
    try:
        _wait_file(pack / "hung")  # the retry hangs as well
    finally:
        _kill(b)
    c, base_c = _serve(pack, pg_url)
    try:
        _wait(pg_url, lambda log: any(k == "persona.event.dead_lettered" for k, _ in log))
        import urllib.request

        with urllib.request.urlopen(f"{base_c}/status", timeout=30) as response:
            status = json.loads(response.read())["personas"]["actor"]
    finally:
        c.send_signal(signal.SIGTERM)
        c.communicate(timeout=60)
    [letter] = status["dead_letters"]
    assert letter["attempts"] == 2 and letter["work_key"] == "webhook:test:go:w2"
    assert len(letter["reasons"]) == 2 and "max_attempts 2" in letter["reason"]
    assert status["counters"]["attempts_exhausted"] == 1
    log = _kinds(pg_url)
    assert [k for k, _ in log].count("persona.run.started") == 2
    assert not any(k in ("persona.run.completed", "persona.run.failed") for k, _ in log)


def test_the_journal_of_dead_attempts(tmp_path: Path) -> None:
    """Pure: results and responses as recorded; a call that was executing when its
    process died is answered with an error, never executed again."""
    from datetime import UTC, datetime

    at = datetime(2026, 11, 28, tzinfo=UTC)

    def event(i: int, kind: str, payload: dict[str, Any]) -> Event:
        return Event(i, "t", "p", kind, at, payload, "charter", None)

    events = [
        event(1, "persona.tool.executing", {"run_id": "r1", "call_id": "call_1", "tool": "gh"}),
        event(2, "persona.tool.executed", {"run_id": "r1", "call_id": "call_1",
              "journal": {"call_id": "call_1", "tool": "gh", "result": {"ok": 1}}}),
        event(3, "persona.usage.recorded", {"run_id": "r1", "journal": {
              "model": {"text": "hi"}, "run_usd": 0.25, "run_tokens": 40}}),
        event(4, "persona.tool.executing", {"run_id": "r1", "call_id": "call_2", "tool": "gh"}),
        event(5, "persona.run.journaled", {"run_id": "r2", "call_id": "call_3", "tool": "x",
              "result": 3}),
        event(6, "persona.tool.executed", {"run_id": "other", "call_id": "call_9",
              "journal": {"call_id": "call_9", "tool": "gh", "result": {}}}),
    ]  # fmt: skip
    journal = journal_of(events, ["r1", "r2"])
    assert journal.tools["call_1"] == {"tool": "gh", "result": {"ok": 1}}
    assert journal.tools["call_2"]["result"] == {"status": "error", "error": UNDECIDED}
    assert journal.tools["call_3"] == {"tool": "x", "result": 3}
    assert "call_9" not in journal.tools
    assert journal.models == [{"text": "hi"}] and journal.run_usd == 0.25
    assert journal.run_tokens == 40
