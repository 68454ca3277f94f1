"""Group commit of webhooks (issue 15): concurrent webhooks to one replica are recorded in
one accept transaction, each answered only after it is durable; a duplicate work key is
admitted once, also when posted to several replicas at once; a batch whose transaction
fails answers every webhook in it with an error and records none of them."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import signal
import sqlite3
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from charter.run.serve import Server
from charter.run.session import RunOptions
from charter.runtime import Kind, open_event_log

from .conftest import persona_toml
from .test_postgres import pg_url  # noqa: F401  (the fixture)
from .test_replicas_postgres import _serve as replica

SECRET = "group-secret"


def _body(ident: str) -> bytes:
    return json.dumps({"id": ident, "type": "go", "calls": []}).encode()


def _headers(body: bytes) -> dict[str, str]:
    digest = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return {"x-hub-signature-256": "sha256=" + digest}


@contextmanager
def _server(pack: Path, state: dict[str, str]) -> Iterator[Server]:
    """A serve front without its workers: what it accepts stays queued in the log."""
    options = RunOptions(manifest=str(pack), holder="serve-test", **state)
    server = Server(options, port=0, secrets={"test": SECRET}, log_line=lambda _line: None)
    try:
        yield server
    finally:
        server._accept_pool.submit(server._close_accept).result(timeout=30)
        server._accept_pool.shutdown()
        server.socket.close()


def _batch(server: Server, idents: list[str]) -> list[tuple[int, dict[str, Any]]]:
    """Post ``idents`` concurrently while the accept thread is busy, so that they all wait
    for the same turn; then let it go."""
    # the turns queued by the last batch's other requests run first (they find nothing
    # waiting); otherwise one could take part of this batch before it is complete
    server._accept_pool.submit(lambda: None).result(timeout=60)
    gate = threading.Event()
    server._accept_pool.submit(gate.wait)
    with ThreadPoolExecutor(len(idents)) as pool:
        answers = [
            pool.submit(server.accept_webhook, "test", _body(i), _headers(_body(i))) for i in idents
        ]
        deadline = time.monotonic() + 30
        while len(server._accepting) < len(idents):
            assert time.monotonic() < deadline, "the webhooks never queued up"
            time.sleep(0.01)
        assert not any(a.done() for a in answers)  # nobody answered before the commit
        gate.set()
        return [a.result(timeout=60) for a in answers]


def _queued(state: dict[str, str]) -> list[tuple[int, str, str]]:
    log = open_event_log(url=state.get("state_url"), state_dir=state.get("state_dir"))
    try:
        return [
            (e.event_id, e.kind, e.payload["work_key"])
            for e in log.iter_all()
            if e.kind in (Kind.WORK_QUEUED, Kind.WORK_COALESCED)
        ]
    finally:
        log.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def state(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    if request.param == "sqlite":
        return {"state_dir": str(tmp_path / "state")}
    url: str = request.getfixturevalue("pg_url")
    return {"state_url": url}


def test_concurrent_webhooks_to_one_replica_are_one_transaction(
    make_pack: Callable[..., Path], state: dict[str, str]
) -> None:
    pack = make_pack(persona_toml(extra="runtime = { max_concurrency = 2 }"))
    with _server(pack, state) as server:
        assert server.accept_webhook("test", _body("first"), _headers(_body("first")))[0] == 202
        assert server._accept_session is not None
        log = server._accept_session.log
        before = log.commits
        idents = [f"w{n}" for n in range(8)] + ["w3", "w5"]  # two duplicates in the batch
        answers = _batch(server, idents)
        assert log.commits - before == 1  # ten webhooks, one write transaction
    assert [code for code, _ in answers] == [202] * 10
    assert [body["work_key"] for _, body in answers] == [f"webhook:test:go:{i}" for i in idents]
    recorded = _queued(state)
    queued = [key for _, kind, key in recorded if kind == Kind.WORK_QUEUED]
    # each key is queued once (in arrival order: the threads' race decides it); a
    # duplicate coalesces into its entry
    assert queued[0] == "webhook:test:go:first"
    assert sorted(queued[1:]) == [f"webhook:test:go:{i}" for i in idents[:8]]
    coalesced = [key for _, kind, key in recorded if kind == Kind.WORK_COALESCED]
    assert sorted(coalesced) == ["webhook:test:go:w3", "webhook:test:go:w5"]


POISON_PG = """
CREATE FUNCTION {schema}.poison() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.payload->>'work_key' LIKE '%poison%' THEN
    RAISE EXCEPTION 'poisoned work key %', NEW.payload->>'work_key';
  END IF;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER poison AFTER INSERT ON {schema}.events
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {schema}.poison();
"""
POISON_SQLITE = """
CREATE TRIGGER poison BEFORE INSERT ON events WHEN NEW.payload LIKE '%poison%'
BEGIN SELECT RAISE(ABORT, 'poisoned work key'); END;
"""


def _poison(state: dict[str, str]) -> None:
    """Make the store refuse any transaction holding a poisoned work key: on PostgreSQL
    at COMMIT (a deferred constraint trigger), on SQLite at the insert."""
    if "state_url" in state:
        url, schema = state["state_url"].split("?schema=")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(POISON_PG.format(schema=schema).encode())
        return
    with sqlite3.connect(Path(state["state_dir"]) / "events.sqlite3") as conn:
        conn.executescript(POISON_SQLITE)


def test_a_failed_batch_fails_every_webhook_in_it_and_records_none(
    make_pack: Callable[..., Path], state: dict[str, str]
) -> None:
    pack = make_pack(persona_toml(extra="runtime = { max_concurrency = 2 }"))
    with _server(pack, state) as server:
        assert server.accept_webhook("test", _body("first"), _headers(_body("first")))[0] == 202
        _poison(state)
        failed = _batch(server, ["a", "poison", "b"])
        # the twin: the next batch, without the poisoned key, is recorded
        worked = _batch(server, ["a", "b", "c"])
    assert [code for code, _ in failed] == [503] * 3
    assert all("poisoned" in body["error"] for _, body in failed)
    assert [code for code, _ in worked] == [202] * 3
    queued = [key for _, kind, key in _queued(state) if kind == Kind.WORK_QUEUED]
    assert queued[0] == "webhook:test:go:first"
    assert sorted(queued[1:]) == [f"webhook:test:go:{i}" for i in ("a", "b", "c")]


def _serve(pack: Path, url: str) -> tuple[subprocess.Popen[str], str]:
    return replica(pack, url, "--workers", "2", secret=SECRET)


def _post(base: str, ident: str) -> int:
    body = _body(ident)
    request = urllib.request.Request(f"{base}/hooks/test", data=body, method="POST")
    for name, value in _headers(body).items():
        request.add_header(name, value)
    with urllib.request.urlopen(request, timeout=30) as response:
        return int(response.status)


def test_duplicates_posted_to_three_replicas_at_once_are_admitted_once(
    make_pack: Callable[..., Path],
    pg_url: str,  # noqa: F811
) -> None:
    pack = make_pack(persona_toml(extra="runtime = { max_concurrency = 8 }"))
    replicas = [_serve(pack, pg_url) for _ in range(3)]
    keys = [f"k{n}" for n in range(6)]
    try:
        # every key three times on every replica, all at once
        posts = [(base, key) for key in keys for _, base in replicas for _ in range(3)]
        with ThreadPoolExecutor(len(posts)) as pool:
            codes = list(pool.map(lambda p: _post(*p), posts))
        assert codes == [202] * len(posts)
        deadline = time.monotonic() + 120
        while True:
            log = open_event_log(url=pg_url)
            try:
                events = list(log.iter_all())
            finally:
                log.close()
            done = [e.payload["work_key"] for e in events if e.kind == Kind.RUN_COMPLETED]
            if len(done) >= len(keys) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        time.sleep(1)  # let any second run of a key show itself
        log = open_event_log(url=pg_url)
        try:
            events = list(log.iter_all())
        finally:
            log.close()
    finally:
        for proc, _ in replicas:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.communicate(timeout=60)
    wanted = sorted(f"webhook:test:go:{k}" for k in keys)

    def keyed(kind: str) -> list[str]:
        return sorted(e.payload["work_key"] for e in events if e.kind == kind)

    assert keyed(Kind.WORK_QUEUED) == wanted  # one admission per key across the fleet
    assert keyed(Kind.RUN_STARTED) == wanted
    assert keyed(Kind.RUN_COMPLETED) == wanted
