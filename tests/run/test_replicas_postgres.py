"""Two ``charter serve`` replicas on one PostgreSQL (issue 15, issue 14 §2): a run parked
for an approval on replica A is resumed by replica B after A is killed and the approval
comes from a third process; webhooks taken by either replica run exactly once."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from charter.runtime import open_event_log

from .conftest import charter_argv, executed, invoke, persona_toml, post_webhook
from .test_postgres import pg_url  # noqa: F401  (the fixture)

SECRET = "replica-secret"


def _serve(
    pack: Path, url: str, *extra: str, secret: str = SECRET
) -> tuple[subprocess.Popen[str], str]:
    """A real ``charter serve`` replica on loopback (its own process group) and its URL."""
    env = {**os.environ, "CHARTER_WEBHOOK_SECRET_TEST": secret}
    argv = charter_argv("serve", "--port", "0", "--manifest", str(pack), "--state", url, *extra)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("listening on"):
        proc.kill()
        raise AssertionError(line + proc.communicate()[1])
    return proc, line.split()[2]


def _hook(base: str, ident: str, plan: dict[str, Any]) -> None:
    assert post_webhook(base, SECRET, ident, plan) == 202


def _kinds(url: str) -> list[tuple[str, dict[str, Any]]]:
    log = open_event_log(url=url)
    try:
        return [(e.kind, dict(e.payload)) for e in log.iter_all()]
    finally:
        log.close()


def _wait(url: str, test: Callable[[list[tuple[str, dict[str, Any]]]], bool]) -> None:
    for _ in range(600):
        if test(_kinds(url)):
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out; log: {[k for k, _ in _kinds(url)]}")


def test_a_parked_run_crosses_replicas_and_work_runs_once(
    make_pack: Callable[..., Path],
    pg_url: str,  # noqa: F811
) -> None:
    pack = make_pack(persona_toml(tier="act_with_approval"))
    merge = {"calls": [{"tool": "github", "args": {"action": "merge", "pr": 7}, "stage": "act"}]}
    a, base_a = _serve(pack, pg_url)
    b, base_b = _serve(pack, pg_url)
    try:
        _hook(base_a, "w1", merge)
        _wait(pg_url, lambda log: any(k == "persona.run.parked" for k, _ in log))
        # whichever replica ran it (A took the webhook, B may have been the free one)
        # dies while the run waits; the run holds no lease, nothing expires
        run_id = next(p["run_id"] for k, p in _kinds(pg_url) if k == "persona.run.parked")
        first = next(p["holder"] for k, p in _kinds(pg_url)
                     if k == "persona.lease.acquired" and p["run_id"] == run_id)  # fmt: skip
        parked_on, survivor = (a, b) if first.endswith(f":{a.pid}") else (b, a)
        os.killpg(parked_on.pid, signal.SIGKILL)
        parked_on.communicate()
        base_b = base_a if survivor is a else base_b
        # work posted to the surviving replica runs while the other run stays parked
        _hook(base_b, "w2", {"calls": []})
        _wait(pg_url, lambda log: any(k == "persona.run.completed" for k, _ in log))
        (pending,) = json.loads(invoke(["approve", "--json", "--state", pg_url]).stdout)["pending"]
        granted = invoke(["approve", pending["run_id"], pending["call_id"], "--state", pg_url])
        assert granted.exit_code == 0, granted.output
        # the surviving replica takes the decided run up
        _wait(pg_url, lambda log: sum(k == "persona.run.completed" for k, _ in log) == 2)
    finally:
        for proc in (a, b):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.communicate(timeout=30)
    log = _kinds(pg_url)
    completed = sorted(p["work_key"] for k, p in log if k == "persona.run.completed")
    assert completed == ["webhook:test:go:w1", "webhook:test:go:w2"]  # each exactly once
    assert executed(pack) == [{"action": "merge", "pr": 7}]
    # the leases name their replica: the parked run was taken up by the survivor
    holders = [
        p["holder"] for k, p in log if k == "persona.lease.acquired" and p["run_id"] == run_id
    ]
    assert holders == [
        f"charter-serve@{socket.gethostname()}:{parked_on.pid}",
        f"charter-serve@{socket.gethostname()}:{survivor.pid}",
    ]


def test_work_taken_by_a_busy_replica_runs_on_a_free_one(
    make_pack: Callable[..., Path],
    pg_url: str,  # noqa: F811
) -> None:
    """Replica A's only worker is busy; what A accepts is run by B (woken by NOTIFY)."""
    pack = make_pack(persona_toml(extra="runtime = { max_concurrency = 2 }"))
    a, base_a = _serve(pack, pg_url)
    b, base_b = _serve(pack, pg_url)
    try:
        _hook(base_a, "long", {"sleep": 6})
        _wait(pg_url, lambda log: any(k == "persona.run.running" for k, _ in log))
        holder = next(p["holder"] for k, p in _kinds(pg_url) if k == "persona.lease.acquired")
        # the replica whose only worker runs the long one takes the short webhook too
        busy, free = (a, b) if holder.endswith(f":{a.pid}") else (b, a)
        started = time.monotonic()
        _hook(base_a if busy is a else base_b, "short", {"calls": []})
        _wait(pg_url, lambda log: any(k == "persona.run.completed" for k, _ in log))
        took = time.monotonic() - started
    finally:
        for proc in (a, b):
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)
    log = _kinds(pg_url)
    first = next(p for k, p in log if k == "persona.run.completed")
    assert first["work_key"] == "webhook:test:go:short"  # not behind the long run on A
    short_run = first["run_id"]
    (holder,) = [p["holder"] for k, p in log
                 if k == "persona.lease.acquired" and p["run_id"] == short_run]  # fmt: skip
    assert holder == f"charter-serve@{socket.gethostname()}:{free.pid}"
    assert took < 6  # it did not wait for A's worker


def test_a_schedule_fires_once_across_three_replicas(
    make_pack: Callable[..., Path],
    pg_url: str,  # noqa: F811
) -> None:
    pack = make_pack(persona_toml(extra='schedules = ["*/30 * * * *"]'))
    argv = charter_argv("serve", "--once", "--json", "--at", "2026-11-21T09:30:10Z",
                        "--manifest", str(pack), "--state", pg_url)  # fmt: skip
    replicas = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    outcomes = []
    for proc in replicas:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        outcomes += [r["status"] for r in json.loads(out)]
    assert outcomes.count("completed") == 1  # the others see it leased or done
    assert set(outcomes) <= {"completed", "lease_busy", "duplicate"}
    log = _kinds(pg_url)
    fired = [p["work_key"] for k, p in log if k == "persona.schedule.fired"]
    assert fired == ["schedule:actor:2026-11-21T09:30Z"]
    assert [k for k, _ in log].count("persona.run.completed") == 1


def test_the_database_goes_away_and_comes_back(make_pack: Callable[..., Path]) -> None:
    """Every connection of serve is cut (as a PostgreSQL restart does): it reconnects with
    backoff, says so once, and no work is lost or run twice."""
    import psycopg

    from .test_postgres import PG_BASE_URL

    name = f"charter_outage_{uuid.uuid4().hex[:10]}"
    admin = psycopg.connect(PG_BASE_URL, autocommit=True)
    admin.execute(f'CREATE DATABASE "{name}"')
    url = PG_BASE_URL.rsplit("/", 1)[0] + f"/{name}"

    def cut() -> int:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        ).fetchall()
        return len(rows)

    pack = make_pack()
    proc, base = _serve(pack, url)
    try:
        _hook(base, "before", {"calls": []})
        _wait(url, lambda log: any(k == "persona.run.completed" for k, _ in log))
        assert cut() >= 2  # the workers', the watcher's and the accept connections
        accepted = False
        for _ in range(200):  # the sender retries until serve answers 202 again
            try:
                _hook(base, "after", {"calls": []})
                accepted = True
                break
            except urllib.error.HTTPError as exc:
                assert exc.code == 503
                time.sleep(0.1)
        assert accepted
        _wait(url, lambda log: sum(k == "persona.run.completed" for k, _ in log) == 2)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        log = _kinds(url)
        cut()
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.close()
    completed = sorted(p["work_key"] for k, p in log if k == "persona.run.completed")
    assert completed == ["webhook:test:go:after", "webhook:test:go:before"]
    assert out.count("state store unavailable") == 1, out  # once per outage
    assert "state store reachable again" in out


def _restart_cluster() -> None:
    """``pg_ctlcluster <version> main restart``: the real thing, not a connection cut."""
    import shutil
    import subprocess

    versions = sorted(os.listdir("/etc/postgresql")) if os.path.isdir("/etc/postgresql") else []
    if not versions or shutil.which("pg_ctlcluster") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI runs against the local Debian cluster: pg_ctlcluster is missing")
        pytest.skip("no local Debian PostgreSQL cluster to restart")
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", versions[-1], "main", "restart"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    for _ in range(100):
        ready = subprocess.run(["pg_isready", "-q", "-h", "127.0.0.1"], check=False)
        if ready.returncode == 0:
            return
        time.sleep(0.2)
    raise AssertionError("PostgreSQL did not come back after the restart")


def test_postgresql_restarted_under_serve(make_pack: Callable[..., Path]) -> None:
    """``pg_ctlcluster ... restart`` while serve runs: it reconnects, says so once, and
    every work key runs exactly once."""
    import psycopg

    from .test_postgres import PG_BASE_URL

    name = f"charter_restart_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_BASE_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = PG_BASE_URL.rsplit("/", 1)[0] + f"/{name}"
    pack = make_pack()
    proc, base = _serve(pack, url)
    try:
        _hook(base, "before", {"calls": []})
        _wait(url, lambda log: any(k == "persona.run.completed" for k, _ in log))
        _restart_cluster()
        accepted = False
        for _ in range(300):  # the sender retries until serve answers 202 again
            try:
                _hook(base, "after", {"calls": []})
                accepted = True
                break
            except urllib.error.HTTPError as exc:
                assert exc.code == 503
                time.sleep(0.1)
        assert accepted
        _wait(url, lambda log: sum(k == "persona.run.completed" for k, _ in log) == 2)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        log = _kinds(url)
        with psycopg.connect(PG_BASE_URL, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
            admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
    completed = sorted(p["work_key"] for k, p in log if k == "persona.run.completed")
    assert completed == ["webhook:test:go:after", "webhook:test:go:before"]
    assert out.count("state store unavailable") == 1, out  # once per outage
    assert "state store reachable again" in out
