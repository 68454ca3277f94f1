"""deploy/: the compose file validates with docker-compose and refuses to start without
its secrets; the systemd unit and the image describe the same `charter serve`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _compose() -> list[str]:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if os.environ.get("CI") == "true":
        pytest.fail("docker-compose is not installed (make sandbox-tools)")
    pytest.skip("docker-compose is not installed (make sandbox-tools)")


def _config(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_")}
    return subprocess.run(
        [*_compose(), "-f", str(DEPLOY / "compose.yaml"), "config"],
        capture_output=True, text=True, env={**clean, **env}, check=False, timeout=60,
    )  # fmt: skip


def test_compose_file_is_valid_and_has_two_replicas_on_one_postgres() -> None:
    proc = _config({"CHARTER_WEBHOOK_SECRET_GITHUB": "s", "CHARTER_CONSOLE_TOKENS": "ops:t"})
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    for name in ("postgres:", "replica-a:", "replica-b:"):
        assert name in text
    assert text.count("CHARTER_STATE_URL: postgresql://charter:charter@postgres:5432/charter") == 2
    assert "/readyz" in text


def test_compose_refuses_to_start_without_its_secrets() -> None:
    proc = _config({})
    assert proc.returncode != 0
    assert "set the GitHub webhook secret" in proc.stderr + proc.stdout


def test_unit_and_image_run_serve() -> None:
    unit = (DEPLOY / "charter-serve.service").read_text()
    assert "ExecStart=/usr/local/bin/charter serve" in unit and "KillSignal=SIGTERM" in unit
    assert "charter serve" in (DEPLOY / "Dockerfile").read_text()
