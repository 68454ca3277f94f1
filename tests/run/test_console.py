"""The console's HTTP surface: token access, CSRF, approvals as the CLI writes them, metrics."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from charter.run import RunOptions
from charter.run.web import Access, AccessError, build_app
from charter.run.web.access import parse_tokens

from .conftest import charter_argv, envelope, events

MERGE = {"calls": [{"tool": "github", "args": {"action": "merge", "pr": 7}, "stage": "act"}]}
TOKEN = "alice-token-0123456789"


def test_tokens_parse_and_public_bind_needs_one() -> None:
    assert parse_tokens("alice:" + TOKEN) == {TOKEN: "alice"}
    with pytest.raises(AccessError, match="name:token"):
        parse_tokens("alice")
    with pytest.raises(AccessError, match="16"):
        parse_tokens("alice:short")
    with pytest.raises(AccessError, match="not loopback"):
        Access.from_env({}, host="0.0.0.0")
    assert Access.from_env({}, host="127.0.0.1").open
    assert not Access.from_env({"CHARTER_CONSOLE_TOKENS": "a:" + TOKEN}, host="0.0.0.0").open


@pytest.fixture
def waiting(make_pack: Callable[..., Path], tmp_path: Path) -> Iterator[tuple[Path, Any]]:
    """A pack whose ``actor`` run waits for an approval (real time, its own process)."""
    pack = make_pack()
    argv = charter_argv(
        "persona", "run", "actor", "--tier", "act_with_approval", "--no-input",
        "--payload", str(envelope(tmp_path / "e.json", MERGE)), "--json",
        "--manifest", str(pack), "--state-dir", str(pack / "state"),
    )  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(600):  # polls for the event, not for a duration
            if any(e["kind"] == "persona.approval.requested" for e in events(pack)):
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        yield pack, proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _client(pack: Path) -> Any:
    from starlette.testclient import TestClient

    access = Access({TOKEN: "alice"})
    options = RunOptions(manifest=pack, state_dir=pack / "state")
    return TestClient(build_app(options, access=access))


def _kinds(pack: Path) -> list[str]:
    return [e["kind"] for e in events(pack)]


def test_without_token_nothing_is_shown_and_nothing_changes(waiting: tuple[Path, Any]) -> None:
    pack, _proc = waiting
    client = _client(pack)
    before = _kinds(pack)
    for path in ("/console", "/console/approvals", "/api/fleet", "/api/approvals", "/metrics",
                 "/status", "/console/feed"):  # fmt: skip
        assert client.get(path).status_code == 401, path
        assert client.get(path, headers={"Authorization": "Bearer wrong-token-xxxxxxxx"}
                          ).status_code == 401  # fmt: skip
    pending = client.get("/api/approvals", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    (item,) = pending
    # the console's incremental fold agrees with charter approve's listing
    from charter.run import pending_approvals
    from charter.runtime import open_event_log

    log = open_event_log(state_dir=pack / "state")
    try:
        (listed,) = pending_approvals(log)
    finally:
        log.close()
    assert {k: v for k, v in item.items() if k not in ("decision", "change", "request")} == listed
    asks = item["decision"]
    assert asks["outcome"] == "ask" and "act_with_approval" in asks["reason"]
    # what asks is the tier: named as the frame and its reason as the rule (not null)
    assert asks["dimension"] == "autonomy_tier"
    assert asks["frame"] == "autonomy tier act_with_approval"
    assert asks["rule"] == "lowered to act_with_approval for this run (was act_auto)"
    # what it would change: a merge of PR 7 (this trigger carried no pull_request object)
    assert item["change"] == {"kind": "merge", "pr": 7, "pull_request": None}
    url = f"/console/approvals/{item['run_id']}/{item['call_id']}"
    # no token: 401 even with a form that names an approver
    refused = client.post(url, data={"decision": "approve", "by": "mallory", "csrf": "x"})
    assert refused.status_code == 401
    # a token but no (or a wrong) CSRF token: 403
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert client.post(url, data={"decision": "approve"}, headers=auth).status_code == 403
    forged = client.post(url, data={"decision": "approve", "csrf": "0" * 64}, headers=auth)
    assert forged.status_code == 403
    assert _kinds(pack) == before  # nothing was recorded
    assert client.get("/healthz").status_code == 200  # probes stay open
    ready = client.get("/readyz").json()
    assert ready["ready"] is True and ready["backend"] == "sqlite"


def test_approve_from_console_records_the_token_name(waiting: tuple[Path, Any]) -> None:
    pack, proc = waiting
    client = _client(pack)
    login = client.post("/console/login", data={"token": TOKEN}, follow_redirects=False)
    assert login.status_code == 303 and "httponly" in login.headers["set-cookie"].lower()
    page = client.get("/console/approvals")  # the cookie now
    assert page.status_code == 200 and "actor wants" in page.text
    csrf = page.text.split('name="csrf" value="')[1].split('"')[0]
    (item,) = client.get("/api/approvals").json()
    response = client.post(
        f"/api/approvals/{item['run_id']}/{item['call_id']}",
        data={"decision": "approve", "reason": "looks fine", "by": "mallory", "csrf": csrf},
        headers={"Accept": "application/json"},
    )
    assert response.status_code == 200, response.text
    entry = response.json()
    assert entry["status"] == "granted" and entry["by"] == "console:alice"
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    data = json.loads(out)
    assert data["status"] == "completed" and data["approvals"][0]["by"] == "console:alice"
    granted = [e for e in events(pack) if e["kind"] == "persona.approval.granted"]
    assert granted[0]["payload"]["reason"] == "looks fine" and granted[0]["payload"]["receipt_id"]
    again = client.post(
        f"/api/approvals/{item['run_id']}/{item['call_id']}",
        data={"decision": "deny", "csrf": csrf},
        headers={"Accept": "application/json"},
    )
    assert again.status_code == 409 and "already granted" in again.json()["error"]
    fleet = client.get("/console")
    assert fleet.status_code == 200 and 'data-persona="actor"' in fleet.text
    run = client.get(f"/console/runs/{item['run_id']}")
    assert run.status_code == 200 and "persona.approval.granted" in run.text
    metrics = client.get("/metrics").text
    assert 'charter_runs_total{persona="actor",status="completed"} 1.0' in metrics
    assert "charter_approvals_pending 0.0" in metrics
    assert "charter_admission_seconds_bucket" in metrics


def test_open_console_answers_only_to_a_loopback_host(waiting: tuple[Path, Any]) -> None:
    """Without tokens (loopback only), a DNS-rebound origin can neither read nor decide."""
    from starlette.testclient import TestClient

    pack, _proc = waiting
    options = RunOptions(manifest=pack, state_dir=pack / "state")
    app = build_app(options, access=Access.from_env({}, host="127.0.0.1"))
    local = TestClient(app, base_url="http://127.0.0.1:8788")
    page = local.get("/console/approvals")
    assert page.status_code == 200 and "actor wants" in page.text
    csrf = page.text.split('name="csrf" value="')[1].split('"')[0]
    (item,) = local.get("/api/approvals").json()
    before = _kinds(pack)
    rebound = TestClient(app, base_url="http://attacker.example:8788")
    assert rebound.get("/console/approvals").status_code == 403
    url = f"/console/approvals/{item['run_id']}/{item['call_id']}"
    assert rebound.post(url, data={"decision": "approve", "csrf": csrf}).status_code == 403
    assert _kinds(pack) == before
    # the same POST from the loopback origin is recorded as the local user
    done = local.post(url, data={"decision": "deny", "reason": "no", "csrf": csrf},
                      follow_redirects=False)  # fmt: skip
    assert done.status_code == 303 and "denied" in done.headers["location"]
    denied = [e for e in events(pack) if e["kind"] == "persona.approval.denied"]
    assert denied[0]["payload"]["by"].startswith("console:local:")


def _get(url: str) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_charter_console_alone_on_a_state_dir(waiting: tuple[Path, Any]) -> None:
    import os
    import signal

    pack, _proc = waiting
    env = {k: v for k, v in os.environ.items() if k != "CHARTER_CONSOLE_TOKENS"}
    argv = charter_argv("console", "--port", "0", "--state-dir", str(pack / "state"))
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("console on http://127.0.0.1:"), first + proc.stderr.read()
        base = first.split()[2].removesuffix("/console")
        assert _get(f"{base}/healthz")[0] == 200
        code, body = _get(f"{base}/readyz")
        assert code == 200 and json.loads(body)["backend"] == "sqlite"
        code, body = _get(f"{base}/console")  # personas from the log (no manifest)
        assert code == 200 and 'data-persona="actor"' in body and ">running<" in body
        code, body = _get(f"{base}/api/approvals")
        assert code == 200 and json.loads(body)[0]["tool"] == "github"
        assert "charter_approvals_pending 1.0" in _get(f"{base}/metrics")[1]
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "stopped" in out


@pytest.mark.parametrize("command", ["console", "serve"])
def test_public_bind_without_tokens_is_a_clear_error(
    command: str, make_pack: Callable[..., Path]
) -> None:
    import os

    pack = make_pack()
    env = {k: v for k, v in os.environ.items() if k != "CHARTER_CONSOLE_TOKENS"}
    args = [command, "--host", "0.0.0.0", "--port", "0", "--state-dir", str(pack / "state")]
    if command == "serve":
        args += ["--manifest", str(pack)]
    out = subprocess.run(charter_argv(*args), capture_output=True, text=True, env=env)
    assert out.returncode == 2
    assert "CHARTER_CONSOLE_TOKENS" in out.stderr and "Traceback" not in out.stderr
    bad = {**env, "CHARTER_CONSOLE_TOKENS": "alice"}
    out = subprocess.run(charter_argv(*args), capture_output=True, text=True, env=bad)
    assert out.returncode == 2 and "name:token" in out.stderr and "Traceback" not in out.stderr


def test_readyz_reports_an_unreachable_database() -> None:
    from starlette.testclient import TestClient

    options = RunOptions(state_url="postgresql://127.0.0.1:1/test?connect_timeout=1")
    client = TestClient(build_app(options, access=Access({TOKEN: "alice"})))
    assert client.get("/healthz").status_code == 200
    ready = client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["ready"] is False and "cannot connect" in ready.json()["error"]
