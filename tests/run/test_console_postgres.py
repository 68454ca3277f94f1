"""``charter console --state postgresql://...``: readiness, the SSE cursor, an approval."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from .conftest import charter_argv, envelope
from .test_postgres import pg_url  # noqa: F401  (the fixture)

MERGE = {"calls": [{"tool": "github", "args": {"action": "merge", "pr": 7}, "stage": "act"}]}
TOKEN = "bob-token-0123456789abc"


def _frames(base: str, auth: dict[str, str], last: int, count: int) -> list[int]:
    """The first ``count`` frame ids after ``Last-Event-ID: last``."""
    ids: list[int] = []
    headers = {**auth, "Last-Event-ID": str(last)}
    with httpx.stream("GET", f"{base}/console/feed", headers=headers, timeout=30) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: "):
                frame = json.loads(line[6:])
                assert frame["persona_kind"] == "persona" and frame["update_kind"]
                ids.append(frame["event_id"])
                if len(ids) == count:
                    return ids
    return ids


def test_console_on_postgres(
    make_pack: Callable[..., Path],
    tmp_path: Path,
    pg_url: str,  # noqa: F811
) -> None:
    pack = make_pack()
    run = subprocess.Popen(
        charter_argv(
            "persona", "run", "actor", "--tier", "act_with_approval", "--no-input",
            "--payload", str(envelope(tmp_path / "e.json", MERGE)), "--json",
            "--manifest", str(pack), "--state", pg_url,
        ),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    env = {**os.environ, "CHARTER_CONSOLE_TOKENS": f"bob:{TOKEN}"}
    argv = charter_argv("console", "--port", "0", "--state", pg_url, "--manifest", str(pack))
    console = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env)  # fmt: skip
    try:
        assert console.stdout is not None
        first = console.stdout.readline()
        assert first.startswith("console on "), first + console.stderr.read()
        base = first.split()[2].removesuffix("/console")
        auth = {"Authorization": f"Bearer {TOKEN}"}
        ready = httpx.get(f"{base}/readyz").json()
        assert ready["ready"] is True and ready["backend"] == "postgresql"
        assert httpx.get(f"{base}/api/approvals").status_code == 401
        pending: list[dict[str, str]] = []
        for _ in range(600):  # polls for the event, not for a duration
            pending = httpx.get(f"{base}/api/approvals", headers=auth).json()
            if pending:
                break
            assert run.poll() is None, run.communicate()
            time.sleep(0.05)
        (item,) = pending
        # the supervision cursor: strictly after Last-Event-ID, in order
        ids = _frames(base, auth, 0, 3)
        assert ids == [1, 2, 3]
        assert _frames(base, auth, 2, 2) == [3, 4]
        page = httpx.get(f"{base}/console/approvals", headers=auth).text
        match = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
        assert match is not None
        decided = httpx.post(
            f"{base}/api/approvals/{item['run_id']}/{item['call_id']}",
            data={"decision": "approve", "csrf": match.group(1)},
            headers={**auth, "Accept": "application/json"},
        )
        assert decided.status_code == 200, decided.text
        assert decided.json()["by"] == "console:bob"
        out, err = run.communicate(timeout=60)
        assert run.returncode == 0, err
        assert json.loads(out)["status"] == "completed"
    finally:
        for proc in (run, console):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.communicate(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.communicate()
