"""A replica says "listening" when it is ready to take a webhook at its usual speed, and
its threads share one state cache (issue 15). Before, the first webhook of each replica
opened the accept thread's connection and met an HTTP server still starting: 31 ms
against 5 warm, and 80-150 ms with four replicas starting under load, which was the
fleet's p99 (runtime_fleet.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from charter.run import RunOptions, serve
from charter.run.serve import Server
from charter.run.web.data import ConsoleData
from charter.runtime.state import PersonaState

from .conftest import persona_toml
from .test_serve_job_errors import SECRET, _post


@pytest.fixture
def replica(
    make_pack: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Server, list[Any], list[str]]]:
    """A replica serving on a SQLite state, the sessions it opened, and when it said
    "listening" the marks: "http started", "readyz asked"."""
    pack = make_pack(persona_toml())
    sessions: list[Any] = []
    real_open = serve.open_session

    def opened(options: RunOptions) -> Any:
        session = real_open(options)
        sessions.append(session)
        return session

    monkeypatch.setattr(serve, "open_session", opened)
    marks: list[str] = []
    real_ready = ConsoleData.ready

    def ready(self: ConsoleData) -> dict[str, Any]:
        marks.append("readyz asked")
        return real_ready(self)

    monkeypatch.setattr(ConsoleData, "ready", ready)
    server: Server

    def line(text: str) -> None:
        if text.startswith("listening on") and server.http.started:
            marks.append("http started")

    options = RunOptions(manifest=str(pack), state_dir=pack / "state")
    server = Server(options, port=0, secrets={"test": SECRET}, log_line=line, workers=2)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        assert server.listening.wait(30)
        yield server, sessions, marks
    finally:
        server.stop()
        thread.join(timeout=30)
    assert server.worker_error is None


def test_listening_means_the_http_server_answered_its_readiness_probe(
    replica: tuple[Server, list[Any], list[str]],
) -> None:
    _server, _sessions, marks = replica
    assert marks == ["readyz asked", "http started"]


def test_the_first_webhook_opens_no_connection(
    replica: tuple[Server, list[Any], list[str]],
) -> None:
    server, sessions, _marks = replica
    before = len(sessions)
    # the manifest's probe (closed), two workers and the accept thread
    assert before == 4 and server._accept_session is not None
    assert _post(server.address, "first") == 202
    assert len(sessions) == before


def test_every_thread_of_a_replica_folds_into_one_state_cache(
    replica: tuple[Server, list[Any], list[str]],
) -> None:
    server, sessions, _marks = replica
    cache = server.options.state_cache
    assert cache is not None
    assert all(s.runtime.projection.cache is cache for s in sessions)


def test_the_shared_states_start_over_when_the_database_went_away(
    replica: tuple[Server, list[Any], list[str]],
) -> None:
    """A database may come back as a replica that lost the last commits: a state held
    past its log would be folded on from ids that now belong to other events. Each
    thread's own cache went with its session; the shared one is emptied on the outage
    and again when the store is back (what a session put meanwhile)."""
    server, _sessions, _marks = replica
    assert _post(server.address, "held") == 202
    cache = server.options.state_cache
    assert cache is not None
    deadline = time.monotonic() + 30
    while cache.get("actor") is None:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    server.store_down(ConnectionError("gone"))
    assert cache.get("actor") is None
    # a session of the old connection puts its state after that
    cache.put("actor", PersonaState("actor", last_event_id=10**6), 0)
    assert cache.get("actor") is not None
    server.store_back()
    assert cache.get("actor") is None
