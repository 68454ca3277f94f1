"""persona.json ``mcpServers`` as agent-persona users write them (issue 19 items 6-8)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from .conftest import charter, make_persona, plan_json

SERVERS = {
    "local": {"command": "node", "args": ["s.js"], "env": {"DEBUG": True, "PORT": 3, "X": "y"}},
    "offserver": {"command": "node", "args": ["off.js"], "enabled": False},
    "remote": {"url": "https://mcp.example/mcp", "bearerTokenEnvVar": "MCP_TOKEN"},
}


def _everything(plan: dict) -> str:  # type: ignore[type-arg]
    return json.dumps([plan["argv"], plan["files"], plan["environment"]])


@pytest.mark.parametrize("tool", ["claude", "codex", "gemini", "opencode"])
def test_disabled_server_reaches_no_cli(project: Path, tool: str) -> None:
    make_persona(project / ".personas", "p", mcp=SERVERS)
    plan = plan_json(tool, "p", cwd=project)
    assert "offserver" not in _everything(plan)
    assert "off.js" not in _everything(plan)
    assert "local" in plan["mcp_servers"]


def test_codex_env_values_are_strings_and_bearer_token_kept(project: Path) -> None:
    make_persona(project / ".personas", "p", mcp=SERVERS)
    argv = plan_json("codex", "p", cwd=project)["argv"]
    (env,) = [a for a in argv if a.startswith("--config=mcp_servers.local.env=")]
    value = tomllib.loads("v=" + env.split("env=", 1)[1])["v"]
    assert value == {"DEBUG": "true", "PORT": "3", "X": "y"}
    assert '--config=mcp_servers.remote.bearer_token_env_var="MCP_TOKEN"' in argv


@pytest.mark.parametrize("tool", ["claude", "gemini", "opencode"])
def test_other_clis_get_string_env_values(project: Path, tool: str) -> None:
    make_persona(project / ".personas", "p", mcp=SERVERS)
    text = _everything(plan_json(tool, "p", cwd=project))
    assert "DEBUG" in text and "PORT" in text
    assert not re.search(r'(?:DEBUG|PORT)\\*"?\s*[:=]\s*(?:true|3)', text)


def test_env_value_that_is_not_scalar_names_server_and_key(project: Path) -> None:
    make_persona(project / ".personas", "p", mcp={"s": {"command": "x", "env": {"K": [1]}}})
    proc = charter("print-policy", "codex", "p", cwd=project)
    assert proc.returncode != 0
    assert "mcpServers.s.env.K" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("tool", ["claude", "codex", "gemini", "opencode"])
def test_defaults_star_comes_before_the_cli_defaults(project: Path, tool: str) -> None:
    """issue 19 item 5: defaults["*"] reaches every CLI, before its own defaults."""
    make_persona(
        project / ".personas",
        "p",
        defaults={"*": ["--star-arg"], tool: ["--own-arg"], "claud": ["--typo"]},
    )
    plan = plan_json(tool, "p", cwd=project)
    assert plan["args"]["defaults"][:2] == ["--star-arg", "--own-arg"]
    argv = plan["argv"]
    assert argv.index("--star-arg") < argv.index("--own-arg")
    assert "--typo" not in argv
    assert any("defaults['claud']" in n and "ignored" in n for n in plan["notes"])
