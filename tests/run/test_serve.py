"""`charter serve`: schedules across restarts, webhooks with HMAC, status, shutdown."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .conftest import charter_argv, events, invoke, persona_toml


def _once(pack: Path, at: str) -> list[dict[str, Any]]:
    result = invoke(
        ["serve", "--once", "--json", "--at", at, "--manifest", str(pack),
         "--state-dir", str(pack / "state")]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    runs: list[dict[str, Any]] = json.loads(result.stdout)
    return runs


def test_schedule_fires_once_per_minute_across_restarts(make_pack: Callable[..., Path]) -> None:
    pack = make_pack(persona_toml(extra='schedules = ["*/30 * * * *"]'))
    assert _once(pack, "2026-11-21T09:29:59Z") == []  # nothing due yet (never fired)
    (first,) = _once(pack, "2026-11-21T09:30:10Z")
    assert first["status"] == "completed"
    assert first["work_key"] == "schedule:actor:2026-11-21T09:30Z"
    assert _once(pack, "2026-11-21T09:30:50Z") == []  # a restart in the same minute
    assert _once(pack, "2026-11-21T09:59:59Z") == []
    # down over 10:00 and 10:30: caught up once, with the latest missed minute
    (late,) = _once(pack, "2026-11-21T10:45:00Z")
    assert late["work_key"] == "schedule:actor:2026-11-21T10:30Z"
    assert _once(pack, "2026-11-21T10:46:00Z") == []
    fired = [
        e["payload"]["work_key"] for e in events(pack) if e["kind"] == "persona.schedule.fired"
    ]
    assert fired == ["schedule:actor:2026-11-21T09:30Z", "schedule:actor:2026-11-21T10:30Z"]


def _get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=10) as response:
        data: dict[str, Any] = json.loads(response.read())
        return data


def _post(url: str, body: bytes, signature: str | None) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=body, method="POST")
    request.add_header("Content-Type", "application/json")
    if signature is not None:
        request.add_header("X-Hub-Signature-256", signature)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_webhooks_hmac_status_and_graceful_shutdown(make_pack: Callable[..., Path]) -> None:
    pack = make_pack()
    env = {**os.environ, "CHARTER_WEBHOOK_SECRET_TEST": "s3cret"}
    argv = charter_argv(
        "serve", "--port", "0", "--manifest", str(pack), "--state-dir", str(pack / "state")
    )
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("listening on http://127.0.0.1:"), first + proc.stderr.read()
        base = first.split()[2]
        body = json.dumps({"id": "w1", "type": "go", "calls": []}).encode()

        code, _ = _post(f"{base}/hooks/test", body, "sha256=" + "0" * 64)
        assert code == 401
        code, _ = _post(f"{base}/hooks/test", body, None)
        assert code == 401
        status = _get(f"{base}/status")
        assert status["personas"]["actor"]["last_event_id"] == 0  # nothing recorded

        good = "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
        code, accepted = _post(f"{base}/hooks/test", body, good)
        assert code == 202 and accepted == {"work_key": "webhook:test:go:w1", "personas": ["actor"]}
        for _ in range(400):  # waits for an event, not for a duration
            last = _get(f"{base}/status")["personas"]["actor"]["last_run"]
            if last is not None:
                break
            time.sleep(0.05)
        assert last is not None and last["status"] == "completed"
        assert last["work_key"] == "webhook:test:go:w1"
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "bad signature" in out and "webhook test -> actor" in out and "stopped" in out


def test_serve_runs_work_queued_behind_a_dead_holder(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    from datetime import UTC, datetime

    from charter.run import RunOptions, open_session
    from charter.runtime import ReceiptStatus

    from .conftest import envelope, executed, persona_cli

    pack = make_pack()
    session = open_session(RunOptions(manifest=pack, state_dir=pack / "state"))
    try:  # a process took the lease and was killed -9 before finishing
        held = session.runtime.tick("actor", at=datetime(2026, 11, 21, 9, tzinfo=UTC), hold=True)
        assert held.status is ReceiptStatus.STARTED
    finally:
        session.close()
    plan = {"calls": [{"tool": "github", "args": {"action": "merge", "pr": 9}, "stage": "act"}]}
    queued = persona_cli(
        pack, "run", "actor", "--payload", str(envelope(tmp_path / "e.json", plan)),
        "--at", "2026-11-21T09:00:30Z", "--json",
    )  # fmt: skip
    assert json.loads(queued.stdout)["status"] == "queued" and executed(pack) == []
    assert _once(pack, "2026-11-21T09:01:00Z") == []  # the lease still holds: nothing runs
    (ran,) = _once(pack, "2026-11-21T09:30:00Z")  # expired: serve runs the queued work
    assert ran["status"] == "completed" and ran["trigger"]["source"] == "queue"
    assert executed(pack) == [{"action": "merge", "pr": 9}]
    kinds = [e["kind"] for e in events(pack)]
    assert kinds.index("persona.lease.expired") < kinds.index("persona.work.dequeued")


def test_a_worker_pool_runs_webhook_work_side_by_side(make_pack: Callable[..., Path]) -> None:
    """--workers 2: a short run finishes while a long one still holds the other worker."""
    pack = make_pack(persona_toml(extra="runtime = { max_concurrency = 2 }"))
    env = {**os.environ, "CHARTER_WEBHOOK_SECRET_TEST": "s"}
    argv = charter_argv("serve", "--port", "0", "--workers", "2", "--manifest", str(pack),
                        "--state-dir", str(pack / "state"))  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)  # fmt: skip
    try:
        assert proc.stdout is not None
        base = proc.stdout.readline().split()[2]

        def hook(ident: str, plan: dict[str, Any]) -> None:
            body = json.dumps({"id": ident, "type": "go", **plan}).encode()
            sig = "sha256=" + hmac.new(b"s", body, hashlib.sha256).hexdigest()
            status, _ = _post(f"{base}/hooks/test", body, sig)
            assert status == 202

        hook("long", {"sleep": 4})
        for _ in range(200):  # the long run has started (its marker file exists)
            if (pack / "started").exists():
                break
            time.sleep(0.05)
        hook("short", {"calls": []})
        for _ in range(400):
            done = [e["payload"]["work_key"] for e in events(pack)
                    if e["kind"] == "persona.run.completed"]  # fmt: skip
            if done:
                break
            time.sleep(0.05)
        assert done[0] == "webhook:test:go:short"  # it did not wait behind the long run
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    done = [e["payload"]["work_key"] for e in events(pack) if e["kind"] == "persona.run.completed"]
    assert done == ["webhook:test:go:short", "webhook:test:go:long"]


def test_linear_and_slack_webhooks_signed_their_way(make_pack: Callable[..., Path]) -> None:
    fixtures = Path(__file__).parents[1] / "runtime" / "fixtures"
    declared = 'triggers = ["linear.issue_created", "slack.message"]'
    pack = make_pack(persona_toml().replace('triggers = ["test.go"]', declared))
    env = {
        **os.environ,
        "CHARTER_WEBHOOK_SECRET_LINEAR": "lin",
        "CHARTER_WEBHOOK_SECRET_SLACK": "sl",
    }
    argv = charter_argv("serve", "--port", "0", "--manifest", str(pack),
                        "--state-dir", str(pack / "state"))  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)  # fmt: skip

    def post(provider: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
        request = urllib.request.Request(f"{base}/hooks/{provider}", data=body, method="POST")
        for key, value in headers.items():
            request.add_header(key, value)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    try:
        assert proc.stdout is not None
        base = proc.stdout.readline().split()[2]
        body = (fixtures / "linear" / "Issue.create.json").read_bytes()
        assert post("linear", body, {"Linear-Signature": "0" * 64})[0] == 401
        good = hmac.new(b"lin", body, hashlib.sha256).hexdigest()
        code, accepted = post("linear", body, {"Linear-Event": "Issue", "Linear-Signature": good})
        assert code == 202 and accepted == {
            "work_key": "linear:issue:ENG-142",
            "personas": ["actor"],
            # Linear's webhookId + webhookTimestamp: a redelivery is refused by it
            "delivery_id": "linear:5a5b3c3e-0d61-4e5d-8a6c-2f2a0f0e7c11:1795600443422",
        }

        stamp = str(int(time.time()))
        challenge = (fixtures / "slack" / "url_verification.json").read_bytes()

        def slack_headers(raw: bytes, at: str = stamp) -> dict[str, str]:
            mac = hmac.new(b"sl", b"v0:" + at.encode() + b":" + raw, hashlib.sha256)
            return {"X-Slack-Request-Timestamp": at, "X-Slack-Signature": "v0=" + mac.hexdigest()}

        code, answer = post("slack", challenge, slack_headers(challenge))
        assert code == 200 and answer["challenge"].startswith("3eZbrw1aBm2r")
        mention = (fixtures / "slack" / "app_mention.json").read_bytes()
        stale = str(int(time.time()) - 3600)
        assert post("slack", mention, slack_headers(mention, stale))[0] == 401  # replayed
        code, accepted = post("slack", mention, slack_headers(mention))
        assert code == 202 and accepted["work_key"] == "slack:C0123OPS:1795603330.000200"
        for _ in range(400):
            done = {e["payload"]["work_key"] for e in events(pack)
                    if e["kind"] == "persona.run.completed"}  # fmt: skip
            if len(done) == 2:
                break
            time.sleep(0.05)
        assert done == {"linear:issue:ENG-142", "slack:C0123OPS:1795603330.000200"}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def test_a_session_the_server_ended_counts_as_the_store_going_away() -> None:
    """serve reconnects (not crashes) when PostgreSQL ends its session: a restart, or a
    transaction left idle past idle_in_transaction_session_timeout by a partition."""
    import psycopg

    from charter.run.serve import store_error

    assert store_error(psycopg.errors.AdminShutdown())
    assert store_error(psycopg.errors.IdleInTransactionSessionTimeout())
    assert not store_error(psycopg.errors.UniqueViolation())  # a bug: crash, loudly
