"""``mcp_servers.allow`` beside a ``tools.allow`` that names no MCP tool (issue 11 §3).

Before: every allowed server was silently dropped (its tools were not in tools.allow)
while print-policy rated ``mcp_servers.allow`` strong. The rule now lives in
``charter.policy.mcp_tools_follow_servers``; it is applied per author, so a frame that
never mentioned MCP servers is not widened.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from charter.policy import (
    Frame,
    Policy,
    ToolAnnotations,
    ToolCall,
    decide,
    mcp_tools_follow_servers,
)

from .conftest import charter, make_persona, plan_json

POLICY = {"tools": {"allow": ["read", "reed"]}, "mcp_servers": {"allow": ["github"]}}
SERVERS = {"github": {"command": "node", "args": ["gh.js"]}, "jira": {"command": "jira"}}


def _mcp(server: str, tool: str) -> ToolCall:
    return ToolCall(f"{server}__{tool}", {}, ToolAnnotations(mcp_server=server))


def _allowed(call: ToolCall, *policies: Policy) -> bool:
    frames = [Frame(p, f"f{i}", "persona") for i, p in enumerate(policies)]
    return decide(call, frames).allowed


@pytest.mark.parametrize("tool", ["claude", "codex", "gemini", "opencode"])
def test_allowed_servers_reach_every_cli_and_the_rule_is_reported(project: Path, tool: str) -> None:
    make_persona(project / ".personas", "p", policy=POLICY, mcp=SERVERS)
    plan = plan_json(tool, "p", cwd=project, env={**_env(), "CHARTER_LAUNCH_CACHE": "0"})
    assert plan["mcp_servers"] == ["github"]  # jira is not allowed, github is
    assert "gh.js" in json.dumps([plan["argv"], plan["files"], plan["environment"]])
    notes = "\n".join(plan["notes"])
    assert "mcp_servers.allow names github: their tools are allowed too (github__*)" in notes
    assert f"'reed', which is not a {tool} tool; did you mean 'read'?" in notes


def test_persona_check_warns_about_the_rule_and_typos(project: Path) -> None:
    make_persona(project / ".personas", "p", policy=POLICY)
    proc = charter("persona", "check", "--json", cwd=project)
    assert proc.returncode == 0, proc.stderr
    warnings = json.loads(proc.stdout)["warnings"]
    assert any("their tools are allowed too" in w for w in warnings)
    assert any("'reed', which is not a built-in tool; did you mean 'read'?" in w for w in warnings)


def test_the_rule_never_widens_another_authors_frame() -> None:
    manifest, notes = mcp_tools_follow_servers(Policy.from_dict(POLICY))
    assert notes and _allowed(_mcp("github", "get_issue"), manifest)
    assert not _allowed(_mcp("jira", "search"), manifest)  # not an allowed server
    # a folder that restricts tools but never mentions servers keeps MCP tools out
    folder, more = mcp_tools_follow_servers(Policy.from_dict({"tools": {"allow": ["read"]}}))
    assert more == ()
    assert not _allowed(_mcp("github", "get_issue"), manifest, folder)
    assert not _allowed(_mcp("github", "get_issue"), manifest.intersect(folder))


def test_a_tools_list_that_names_mcp_tools_keeps_exactly_those() -> None:
    data = {
        "tools": {"allow": ["read", "github__get_issue"]},
        "mcp_servers": {"allow": ["github"]},
    }
    policy, notes = mcp_tools_follow_servers(Policy.from_dict(data))
    assert notes == ()
    assert _allowed(_mcp("github", "get_issue"), policy)
    assert not _allowed(_mcp("github", "merge_pr"), policy)


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)
