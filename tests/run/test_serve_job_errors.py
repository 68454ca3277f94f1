"""A job that raises does not take the replica down (before: the worker's exception
stopped ``charter serve`` as a whole, with every other persona's work)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from charter.run import RunOptions
from charter.run.serve import Server, Supervisor

from .conftest import events, persona_toml, post_webhook

SECRET = "job-errors"


def _post(base: str, ident: str) -> int:
    return post_webhook(base, SECRET, ident)


def test_a_job_that_raises_is_reported_and_the_next_one_runs(
    make_pack: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    pack = make_pack(persona_toml())
    take = Supervisor.take
    failures = [1]

    def flaky(self: Supervisor, job: Any) -> None:
        if failures:  # the first job hits a bug
            failures.pop()
            raise RuntimeError("a bug in one job")
        take(self, job)

    monkeypatch.setattr(Supervisor, "take", flaky)
    lines: list[str] = []
    options = RunOptions(manifest=str(pack), state_dir=pack / "state")
    server = Server(options, port=0, secrets={"test": SECRET}, log_line=lines.append)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        assert server.listening.wait(30)
        base = server.address
        assert _post(base, "one") == 202
        deadline = time.monotonic() + 30
        while not any("worker error" in line for line in lines):
            assert time.monotonic() < deadline and thread.is_alive(), lines
            time.sleep(0.05)
        assert _post(base, "two") == 202
        while sum(e["kind"] == "persona.run.completed" for e in events(pack)) < 2:
            assert time.monotonic() < deadline and thread.is_alive(), lines
            time.sleep(0.05)
        assert server.status()["job_errors"] == 1
    finally:
        server.stop()
        thread.join(timeout=30)
    assert server.worker_error is None
    # the failed job's work was not lost: the worker's next look at the queue ran it
    completed = sorted(
        e["payload"]["work_key"] for e in events(pack) if e["kind"] == "persona.run.completed"
    )
    assert completed == ["webhook:test:go:one", "webhook:test:go:two"]
    assert [line for line in lines if "worker error" in line] == [
        "worker error (RuntimeError: a bug in one job); the job's work stays in the log, "
        "the worker goes on"
    ]
    assert "RuntimeError: a bug in one job" in capsys.readouterr().err
