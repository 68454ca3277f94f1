"""Gemini gets the persona's MCP servers for any user (issue 11 §3): through the launch's
own ``GEMINI_CLI_HOME`` whose settings merge the user's with the persona's servers,
verified with the real gemini against the fake model (root-only system settings are not
needed)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from . import realcli
from .realcli import installed, mcp_servers, write_persona


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    return root


def test_persona_servers_merge_with_the_users_and_auth_is_kept(repo: Path) -> None:
    if not installed("gemini"):
        if os.environ.get("CI") == "true":
            pytest.fail("gemini is not installed (make clis)")
        pytest.skip("gemini is not installed (make clis)")
    write_persona(repo, {"mcpServers": {"deny": ["beta"]}}, servers=("alpha", "beta"))
    original = realcli._env
    seen: dict[str, Any] = {}

    def home_mode(tool: str, home: Path, *rest: Any) -> dict[str, str]:
        env = original(tool, home, *rest)
        env["CHARTER_GEMINI_MCP"] = "home"  # what a non-root user gets
        settings = home / ".gemini" / "settings.json"
        data = json.loads(settings.read_text())
        data["mcpServers"] = mcp_servers("gamma")  # the user's own server
        settings.write_text(json.dumps(data))
        seen["settings"] = settings
        seen["before"] = settings.read_text()
        return env

    realcli._env = home_mode  # type: ignore[assignment]
    try:
        result = realcli.launch("gemini", repo)
    finally:
        realcli._env = original
    assert result.proc.returncode == 0, result.proc.stderr[-3000:]
    assert result.saw_overlay()  # the user's auth settings were kept: the model was reached
    tools = set(result.tools)
    assert "mcp_alpha_alpha_echo" in tools  # the persona's server arrived
    assert "mcp_gamma_gamma_echo" in tools  # the user's own server is kept
    assert not any(t.startswith("mcp_beta_") for t in tools)  # denied by the policy
    assert seen["settings"].read_text() == seen["before"]  # the user's file is untouched
