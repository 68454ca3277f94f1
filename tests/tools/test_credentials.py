"""Credentials stay in the charter process: not in the agent's shell, sandboxed or not,
while the tools in the same process still authenticate with them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from charter.agent.builtins import builtin_tools
from charter.policy import with_execution_policy
from charter.sandbox import run_command
from charter.testing import FakeGitHub
from charter.tools import GitHubClient, IntegrationSettings, github_tools

from .conftest import TOKEN

SANDBOXED = {
    "commands": {"allow": ["env:*", "printenv:*"]},
    "paths": {"allow": ["./**"]},
    "network": {"deny": ["*"]},
}
UNSANDBOXED = None


def run_bash(workspace: Path, command: str, policy: dict[str, Any] | None) -> Any:
    if policy is None:  # no policy frame: charter.sandbox runs the command unsandboxed
        return asyncio.run(run_command(["env"], workspace=str(workspace)))
    tool = next(t for t in builtin_tools(str(workspace)) if t.name == "bash")

    async def go() -> Any:
        with with_execution_policy(policy, label="persona"):
            return await tool.handler(command=command)

    return asyncio.run(go())


@pytest.mark.parametrize("policy", [SANDBOXED, UNSANDBOXED], ids=["sandboxed", "unsandboxed"])
def test_the_agents_shell_never_sees_the_tokens(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    gh: FakeGitHub,
    policy: dict[str, Any] | None,
) -> None:
    secrets = {
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_APP_PRIVATE_KEY": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END",
        "SLACK_BOT_TOKEN": "xoxb-secret-slack-token",
        "PAGERDUTY_TOKEN": "u+secret-pd-token",
        "PAGERDUTY_ROUTING_KEY": "R0SECRETROUTINGKEY",
    }
    for key, value in secrets.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("CHARTER_TEST_VISIBLE", "visible-twin")
    got = run_bash(tmp_path, "env", policy)
    out = got.get("stdout", "") + got.get("stderr", "")
    assert got.get("exit_code") == 0, got
    for key, value in secrets.items():
        assert value not in out and f"{key}=" not in out
    if policy is UNSANDBOXED:  # the allowed twin: other variables still pass through
        assert "CHARTER_TEST_VISIBLE=visible-twin" in out
    # the same process's GitHub tools authenticate with the token all the same
    monkeypatch.setenv("GITHUB_API_URL", gh.url)
    client = GitHubClient(IntegrationSettings.load().github, "octo/app")
    tool = next(t for t in github_tools(client) if t.name == "github_get_pull_request")
    assert asyncio.run(tool.handler(number=462))["status"] == "ok"
    assert gh.requests[-1].headers["authorization"] == f"token {TOKEN}"
