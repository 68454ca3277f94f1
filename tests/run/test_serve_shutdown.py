"""A replica told to stop (SIGTERM) finishes the run in flight and starts nothing more:
what waits stays queued for the other replicas (docs/deploy.md, issue 15). Before, a
worker's drain went on through the whole backlog before the replica exited, and the
finish of each run admitted the next one."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from charter.run import RunOptions
from charter.run.serve import Server

from .conftest import events, persona_toml, post_webhook

SECRET = "shutdown"


def _post(base: str, ident: str, plan: dict[str, Any]) -> int:
    return post_webhook(base, SECRET, ident, plan)


def _kinds(pack: Path, kind: str) -> list[str]:
    return [e["payload"].get("work_key", "") for e in events(pack) if e["kind"] == kind]


def test_a_stopping_replica_finishes_its_run_and_leaves_the_backlog_queued(
    make_pack: Callable[..., Path],
) -> None:
    pack = make_pack(persona_toml(extra="runtime = { max_concurrency = 1 }"))
    options = RunOptions(manifest=str(pack), state_dir=pack / "state")
    server = Server(options, port=0, secrets={"test": SECRET}, log_line=lambda _l: None)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        assert server.listening.wait(30)
        # (a second long: the stop comes while the first runs, also on a busy machine)
        for n in range(6):
            assert _post(server.address, f"k{n}", {"sleep": 1.0, "calls": []}) == 202
        deadline = time.monotonic() + 30
        while not _kinds(pack, "persona.run.started"):
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        server.stop()  # what SIGTERM does (serve's signal handler)
        thread.join(timeout=60)
    assert not thread.is_alive() and server.worker_error is None
    started = _kinds(pack, "persona.run.started")
    completed = _kinds(pack, "persona.run.completed")
    assert len(started) == 1 and completed == started, (started, completed)
    # the rest waits, accounted for: queued, not taken out of the queue, not failed
    queued = _kinds(pack, "persona.work.queued")
    dequeued = _kinds(pack, "persona.work.dequeued")
    assert len(queued) == 6 and dequeued == started
    assert not _kinds(pack, "persona.run.failed")
    acquired = _kinds(pack, "persona.lease.acquired")
    assert len(acquired) == len(_kinds(pack, "persona.lease.released")) == 1


def test_a_replica_started_again_runs_what_was_left(make_pack: Callable[..., Path]) -> None:
    """The allowed twin: the backlog left queued is run by the next replica."""
    pack = make_pack(persona_toml(extra="runtime = { max_concurrency = 1 }"))
    options = RunOptions(manifest=str(pack), state_dir=pack / "state")
    for round_ in range(2):
        server = Server(options, port=0, secrets={"test": SECRET}, log_line=lambda _l: None)
        thread = threading.Thread(target=server.serve, daemon=True)
        thread.start()
        try:
            assert server.listening.wait(30)
            if round_ == 0:
                for n in range(4):
                    assert _post(server.address, f"k{n}", {"sleep": 0.2, "calls": []}) == 202
                while not _kinds(pack, "persona.run.started"):
                    time.sleep(0.02)
            else:
                deadline = time.monotonic() + 30
                while len(_kinds(pack, "persona.run.completed")) < 4:
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
        finally:
            server.stop()
            thread.join(timeout=60)
    assert sorted(_kinds(pack, "persona.run.completed")) == [
        f"webhook:test:go:k{n}" for n in range(4)
    ]
