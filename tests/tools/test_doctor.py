"""`charter doctor`'s integration checks, through the real entry point, against the fakes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from charter.testing import Fakes, serve_fakes

ROOT = Path(__file__).resolve().parents[2]


def doctor(env: dict[str, str], tmp_path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "HOME", "TMPDIR")}
    proc = subprocess.run(
        [sys.executable, "-m", "charter", "doctor", "--json", *extra],
        cwd=tmp_path,
        env={**keep, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    items = {item["check"]: item for item in json.loads(proc.stdout)}
    return proc.returncode, items


def test_doctor_says_what_works_and_what_is_missing(tmp_path: Path) -> None:
    with serve_fakes(ROOT / "examples/personas/fixtures/fakes.json") as fakes:
        code, items = doctor(fakes.env(), tmp_path)
        assert items["github:token"]["status"] == "ok"
        assert "scopes: repo" in items["github:token"]["detail"]
        assert items["slack:token"]["status"] == "ok"
        assert items["pagerduty:token"]["status"] == "ok"
        assert items["github:webhook_secret"]["status"] == "warn"
        bad = {**fakes.env(), "GITHUB_TOKEN": "ghp_wrong", "SLACK_BOT_TOKEN": "xoxb-wrong"}
        code, items = doctor(bad, tmp_path)
        assert code == 1
        assert items["github:token"]["status"] == "fail"
        assert "Bad credentials" in items["github:token"]["detail"]
        assert items["slack:token"] == {
            "check": "slack:token",
            "status": "fail",
            "detail": f"invalid_auth ({fakes.slack.api_url})",
        }
        assert "ghp_wrong" not in json.dumps(items) and "xoxb-wrong" not in json.dumps(items)
        assert_nothing_written(fakes)


def assert_nothing_written(fakes: Fakes) -> None:
    for fake in (fakes.github, fakes.slack, fakes.pagerduty):
        writes = [r for r in fake.requests if r.method not in ("GET",)]
        # Slack's auth.test is a POST by protocol; it writes nothing
        assert all(r.path == "/api/auth.test" for r in writes), writes


def test_doctor_without_credentials_warns_and_passes(tmp_path: Path) -> None:
    _code, items = doctor({}, tmp_path)
    assert items["github:credentials"]["status"] == "warn"
    assert "GITHUB_TOKEN" in items["github:credentials"]["detail"]
    assert items["pagerduty:routing_key"]["status"] == "warn"
    assert all(
        not k.startswith(("github", "slack", "pagerduty")) or v["status"] != "fail"
        for k, v in items.items()
    )
