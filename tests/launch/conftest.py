"""Shared fixtures: an isolated HOME and state dir, a project with persona folders, fake CLIs."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
FAKE_CLI = HERE / "fakecli.py"
TOOLS = ("claude", "codex", "gemini", "opencode")


@pytest.fixture(autouse=True)
def _isolated(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".state"))
    # caches (the launch cache) follow HOME, so each test starts with an empty one
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    for var in (
        "CHARTER_PERSONA_PATHS",
        "CHARTER_MANIFEST",
        "CHARTER_RUN_MODE",
        "CHARTER_PERSONA_PREFER",
        "CHARTER_LAUNCH_TOOL",
        "OPENCODE_CONFIG_CONTENT",
        "IS_SANDBOX",
    ):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture
def fakebin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with fake claude/codex/gemini/opencode executables."""
    directory = tmp_path_factory.mktemp("bin")
    for tool in TOOLS:
        target = directory / tool
        shutil.copy(FAKE_CLI, target)
        target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return directory


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A repository (``.git`` marks its root) with an empty ``.personas/``."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / ".personas").mkdir()
    return root


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def make_persona(
    root: Path,
    name: str,
    agents: str = "You are {{persona}}.\n",
    *,
    policy: dict[str, Any] | None = None,
    defaults: dict[str, Any] | None = None,
    mcp: dict[str, Any] | None = None,
    claude: str | None = None,
    gemini: str | None = None,
) -> Path:
    """A persona folder under ``root`` (a ``.personas`` directory)."""
    folder = root / name
    write(folder / "AGENTS.md", agents)
    if claude is not None:
        write(folder / "CLAUDE.md", claude)
    if gemini is not None:
        write(folder / "GEMINI.md", gemini)
    data: dict[str, Any] = {}
    if policy is not None:
        data["policy"] = policy
    if defaults is not None:
        data["defaults"] = defaults
    if mcp is not None:
        data["mcpServers"] = mcp
    if data:
        write(folder / "persona.json", json.dumps(data))
    return folder


def env_with(fakebin: Path | None = None, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    if fakebin is not None:
        env["PATH"] = f"{fakebin}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def charter(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run the real ``charter`` entry point."""
    return subprocess.run(
        [sys.executable, "-m", "charter", *args],
        cwd=cwd,
        env=env if env is not None else dict(os.environ),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def plan_json(
    tool: str, persona: str, *extra: str, cwd: Path, env: dict[str, str] | None = None
) -> dict[str, Any]:
    proc = charter("print-policy", tool, persona, "--json", *extra, cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout)
    return data
