"""Wake-ups in ``charter serve`` (issue 15): one waiting wake-up per persona, and a
worker that admits an item while more wait wakes the next worker (baton passing).
Before, each persona had a wake-up per worker waiting, so every queued item woke two
workers that raced for it, and one of them took the log's lock for nothing."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from charter.run.serve import REMOTE_WAKE_DELAY_S, TICK_EVERY_S, Supervisor
from charter.runtime import (
    PersonaRuntime,
    PersonaRuntimeSpec,
    PostgresEventLog,
    ReceiptStatus,
    RunReceipt,
    SqliteEventLog,
)

from .conftest import persona_toml
from .test_group_commit import _body, _headers, _server
from .test_postgres import pg_url  # noqa: F401  (the fixture)

AT = datetime(2026, 4, 24, 12, tzinfo=UTC)


def test_one_waiting_wake_up_per_persona(make_pack: Callable[..., Path], tmp_path: Path) -> None:
    pack = make_pack(persona_toml(extra="runtime = { max_concurrency = 4 }"))
    with _server(pack, {"state_dir": str(tmp_path / "state")}) as server:
        server.workers = 3  # (as --workers 3; this harness starts none)
        for _ in range(5):
            server.wake("ci_fixer")
        server.wake("other")
        assert server.jobs.qsize() == 2  # before: one per worker and persona
        job = server.jobs.get_nowait()
        server._taken(job)
        server.wake(job)  # taken: the next one may wait again
        assert server.jobs.qsize() == 2


def _queued_runtime(tmp_path: Path, slots: int, items: int) -> PersonaRuntime:
    rt = PersonaRuntime(SqliteEventLog(tmp_path), [PersonaRuntimeSpec("p", max_concurrency=slots)])
    for n in range(items):
        rt.trigger("p", provider="t", kind="go", metadata={"id": str(n)}, at=AT, force=True,
                   defer=True)  # fmt: skip
    return rt


def test_a_drain_wakes_the_next_worker_while_more_could_start(tmp_path: Path) -> None:
    rt = _queued_runtime(tmp_path / "a", slots=2, items=3)
    calls: list[tuple[str, int]] = []
    started: list[int] = []

    def execute(receipt: RunReceipt, item: dict[str, Any]) -> RunReceipt:
        started.append(len(calls))
        return rt.finish_run("p", receipt.run_id or "", at=AT + timedelta(seconds=1))

    done = rt.drain("p", at=AT, execute=execute, more=lambda name: calls.append((name, 0)))
    assert [r.status for r in done] == [ReceiptStatus.COMPLETED] * 3
    # after the first and second admissions two and one items waited with a slot free;
    # the third left the queue empty. Each call comes before that item runs.
    assert calls == [("p", 0), ("p", 0)] and started == [1, 2, 2]
    rt.log.close()


def test_no_baton_when_no_slot_is_free(tmp_path: Path) -> None:
    rt = _queued_runtime(tmp_path / "b", slots=1, items=2)
    calls: list[str] = []

    def execute(receipt: RunReceipt, item: dict[str, Any]) -> RunReceipt:
        return rt.finish_run("p", receipt.run_id or "", at=AT + timedelta(seconds=1))

    assert len(rt.drain("p", at=AT, execute=execute, more=calls.append)) == 2
    assert calls == []  # its own run held the only slot each time
    rt.log.close()


def _take(server: Any, timeout: float) -> Any:
    job = server.jobs.get(timeout=timeout)
    server._taken(job)
    return job


def test_own_webhooks_wake_once_and_other_replicas_work_a_moment_later(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    state = {"state_dir": str(tmp_path / "state")}
    pack = make_pack(persona_toml(extra="runtime = { max_concurrency = 4 }"))
    with _server(pack, state) as server, _server(pack, state) as elsewhere:
        watcher = threading.Thread(target=server.watch, daemon=True)
        watcher.start()
        try:
            time.sleep(0.3)  # the watcher has its cursor
            assert server.accept_webhook("test", _body("own"), _headers(_body("own")))[0] == 202
            assert _take(server, 5) == "actor"  # the accept thread's own wake-up
            with pytest.raises(queue.Empty):  # the watcher leaves it to that one
                _take(server, 0.5)
            assert not server._own_queued  # (and forgot it)
            posted = time.monotonic()
            body = _body("remote")
            assert elsewhere.accept_webhook("test", body, _headers(body))[0] == 202
            assert _take(server, 5) == "actor"  # another replica's: woken, once
            assert time.monotonic() - posted >= REMOTE_WAKE_DELAY_S
            with pytest.raises(queue.Empty):
                _take(server, 0.3)
        finally:
            server.stopping.set()
            watcher.join(timeout=10)


def test_the_watcher_reads_only_when_a_commit_could_wake_a_worker(
    make_pack: Callable[..., Path],
    pg_url: str,  # noqa: F811  (the fixture)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PostgreSQL's notify payloads carry each commit's kinds: commits that queue nothing
    (admissions, finishes, heartbeats) cost the watchers of the fleet no read."""
    reads: list[object] = []
    real = PostgresEventLog.read

    def counted(self: PostgresEventLog, **kw: Any) -> Any:
        reads.append(kw.get("kinds"))
        return real(self, **kw)

    monkeypatch.setattr(PostgresEventLog, "read", counted)
    pack = make_pack(persona_toml(extra="runtime = { max_concurrency = 4 }"))
    with _server(pack, {"state_url": pg_url}) as server:
        watcher = threading.Thread(target=server.watch, daemon=True)
        watcher.start()
        writer = PersonaRuntime(PostgresEventLog(pg_url), [PersonaRuntimeSpec("actor")])
        try:
            time.sleep(0.3)
            for n in range(5):  # runs that start and finish at once: nothing queued
                writer.trigger("actor", provider="t", kind="go", metadata={"id": str(n)},
                               at=AT, force=True)  # fmt: skip
            time.sleep(0.5)
            assert reads == []  # before: one read per commit
            writer.trigger("actor", provider="t", kind="go", metadata={"id": "q"}, at=AT,
                           force=True, defer=True)  # fmt: skip
            assert _take(server, 5) == "actor"
            assert len(reads) == 1
        finally:
            server.stopping.set()
            watcher.join(timeout=10)
            writer.log.close()


def test_the_primary_worker_ticks_at_most_every_tick_interval_between_jobs(
    make_pack: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ticks: list[float] = []
    real = Supervisor.tick

    def counted(self: Supervisor, now: datetime) -> Any:
        ticks.append(time.monotonic())
        return real(self, now)

    monkeypatch.setattr(Supervisor, "tick", counted)
    pack = make_pack(persona_toml(extra="runtime = { max_concurrency = 4 }"))
    with _server(pack, {"state_dir": str(tmp_path / "state")}) as server:
        server.listening.set()
        worker = threading.Thread(target=server.work, daemon=True)
        worker.start()
        try:
            assert server.ready.wait(30)
            start = time.monotonic()
            while time.monotonic() - start < 1.2:  # a job every 20 ms, as under load
                server.jobs.put("nobody")  # (an unknown persona: nothing to do)
                time.sleep(0.02)
            took = time.monotonic() - start
        finally:
            server.stopping.set()
            worker.join(timeout=30)
    during = [t for t in ticks if start <= t <= start + took]
    assert 1 <= len(during) <= took / TICK_EVERY_S + 1, during  # before: one per job (~60)
