"""The real CLIs, launched by ``charter launch``, against a fake model on 127.0.0.1.

What the translation achieves is judged by what reaches the model: the tools each
request offers, and (with a scripted tool call) the tool result that comes back when the
model tries something the policy denies. ``make test`` installs the pinned CLIs first
(``make clis``); without them these tests are skipped, except under CI=true.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from .fakemodel import Call
from .realcli import Result, installed, launch, write_persona


def _need(tool: str) -> None:
    if not installed(tool):
        if os.environ.get("CI") == "true":
            pytest.fail(f"{tool} is not installed (make clis)")
        pytest.skip(f"{tool} is not installed (make clis)")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "secrets").mkdir()
    (root / "secrets" / "x.txt").write_text("TOPSECRET\n")
    (root / "src").mkdir()
    return root


def run(
    tool: str,
    repo: Path,
    policy: dict[str, Any] | None,
    *,
    servers: tuple[str, ...] = (),
    call: tuple[str, dict[str, Any]] | None = None,
    strict: bool = False,
    tier: str = "act_auto",
    server_extra: dict[str, Any] | None = None,
) -> Result:
    _need(tool)
    write_persona(repo, policy, tier=tier, servers=servers, server_extra=server_extra)
    scripted = None
    if call is not None:
        args = {
            k: v.replace("PROJ", str(repo)) if isinstance(v, str) else v for k, v in call[1].items()
        }
        scripted = Call(call[0], args)
    result = launch(tool, repo, launcher=("--strict-policy",) if strict else (), call=scripted)
    if not (strict and result.proc.returncode == 3):
        assert result.proc.returncode == 0, result.proc.stderr[-3000:]
        assert result.saw_overlay(), "the persona's instructions did not reach the model"
    return result


MCP_POLICY = {"mcpServers": {"deny": ["beta"]}}
ALLOW_READS = {"tools": {"allow": ["read", "glob", "grep", "alpha__*", "beta__*"]}, **MCP_POLICY}


# -- Claude Code -----------------------------------------------------------------------------


def test_claude_allow_list_and_mcp_filter(repo: Path) -> None:
    r = run("claude", repo, ALLOW_READS, servers=("alpha", "beta"))
    assert sorted(r.tools) == ["Glob", "Grep", "Read", "mcp__alpha__alpha_echo"]
    assert not (repo / "CLAUDE.md").exists()


def test_claude_deny_list(repo: Path) -> None:
    r = run(
        "claude",
        repo,
        {"tools": {"deny": ["bash", "webfetch", "websearch"]}, **MCP_POLICY},
        servers=("alpha", "beta"),
    )
    assert {"Read", "Edit", "Write", "Glob", "Grep", "mcp__alpha__alpha_echo"} <= set(r.tools)
    assert not {"Bash", "WebFetch", "WebSearch", "mcp__beta__beta_echo"} & set(r.tools)


def test_claude_nothing_allowed_offers_no_tool(repo: Path) -> None:
    r = run("claude", repo, {"tools": {"allow": ["github"]}})  # no Claude tool matches
    assert r.tools == []


def test_claude_side_effect_ceiling(repo: Path) -> None:
    r = run("claude", repo, {"side_effect_level": "read_only"})
    assert {"Read", "Glob", "Grep"} <= set(r.tools)
    assert not {"Bash", "Edit", "Write", "WebFetch", "WebSearch", "NotebookEdit"} & set(r.tools)


def test_claude_refuses_a_denied_path(repo: Path) -> None:
    r = run(
        "claude",
        repo,
        {"paths": {"deny": ["./secrets"]}},
        call=("Read", {"file_path": "PROJ/secrets/x.txt"}),
    )
    assert r.results and "denied by your permission settings" in r.results[0]
    assert "TOPSECRET" not in " ".join(r.results)


def test_claude_refuses_a_denied_command(repo: Path) -> None:
    r = run(
        "claude",
        repo,
        {"commands": {"deny": ["curl:*"]}},
        call=("Bash", {"command": "curl -s http://127.0.0.1:9/", "description": "x"}),
    )
    assert r.results and "has been denied" in r.results[0]


def test_claude_command_allow_list_in_act_auto(repo: Path) -> None:
    r = run(
        "claude",
        repo,
        {"commands": {"allow": ["git:*"]}},
        call=("Bash", {"command": "touch PROJ/made.txt", "description": "x"}),
    )
    assert r.results and "denied" in r.results[0]
    assert not (repo / "made.txt").exists()


def test_claude_strict_mode(repo: Path) -> None:
    ok = run(
        "claude", repo, {"tools": {"allow": ["read"]}, "network": {"deny": ["*"]}}, strict=True
    )
    assert ok.tools == ["Read"]
    refused = run("claude", repo, {"network": {"deny": ["*"]}}, strict=True)
    assert refused.proc.returncode == 3 and "network.deny" in refused.proc.stderr
    assert refused.model.requests == []


# -- Codex -----------------------------------------------------------------------------------


def test_codex_switches_and_mcp_filter(repo: Path) -> None:
    r = run(
        "codex",
        repo,
        {"tools": {"deny": ["bash", "websearch", "task"]}, **MCP_POLICY},
        servers=("alpha", "beta"),
    )
    assert "mcp__alpha/alpha_echo" in r.tools and "view_image" in r.tools
    for gone in ("exec_command", "write_stdin", "web_search", "multi_agent_v1"):
        assert gone not in r.tools
    assert not any("beta" in t for t in r.tools)


def test_codex_starts_with_non_string_mcp_env_values(repo: Path) -> None:
    # Issue 19: persona.json env {"DEBUG": true, "N": 3} once reached codex as TOML
    # booleans/numbers, and codex 0.169 refused to start.
    r = run("codex", repo, None, servers=("alpha",), server_extra={"env": {"DEBUG": True, "N": 3}})
    assert "mcp__alpha/alpha_echo" in r.tools


def test_codex_denied_writes_make_the_sandbox_read_only(repo: Path) -> None:
    r = run(
        "codex",
        repo,
        {"tools": {"deny": ["edit", "write"]}},
        call=("exec_command", {"cmd": "touch PROJ/made.txt"}),
    )
    assert "exec_command" in r.tools
    assert r.results and "Read-only file system" in r.results[0]
    assert not (repo / "made.txt").exists()


def test_codex_writable_roots(repo: Path) -> None:
    r = run(
        "codex",
        repo,
        {"paths": {"write": {"allow": ["./"]}}},
        call=("exec_command", {"cmd": "touch PROJ/src/in.txt; touch PROJ/../out.txt"}),
    )
    assert r.results, r.model.requests
    assert (repo / "src" / "in.txt").exists()
    assert not (repo.parent / "out.txt").exists()  # /tmp is excluded from the sandbox


def test_codex_strict_mode(repo: Path) -> None:
    ok = run("codex", repo, {"network": {"deny": ["*"]}}, strict=True)
    assert ok.proc.returncode == 0 and "web_search" not in ok.tools
    refused = run("codex", repo, {"commands": {"deny": ["curl:*"]}}, strict=True)
    assert refused.proc.returncode == 3 and "commands.deny (none)" in refused.proc.stderr
    assert refused.model.requests == []


# -- Gemini CLI ------------------------------------------------------------------------------


def test_gemini_allow_list_and_mcp_filter(repo: Path) -> None:
    r = run("gemini", repo, ALLOW_READS, servers=("alpha", "beta"))
    assert sorted(r.tools) == ["glob", "grep_search", "mcp_alpha_alpha_echo", "read_file"]
    assert not (repo / "GEMINI.md").exists()


def test_gemini_deny_list(repo: Path) -> None:
    r = run("gemini", repo, {"tools": {"deny": ["bash", "webfetch", "websearch", "edit"]}})
    assert {"read_file", "write_file", "glob", "grep_search"} <= set(r.tools)
    for gone in (
        "run_shell_command",
        "web_fetch",
        "google_web_search",
        "replace",
        "list_background_processes",
    ):
        assert gone not in r.tools


def test_gemini_refuses_denied_commands_and_paths(repo: Path) -> None:
    r = run(
        "gemini",
        repo,
        {"commands": {"deny": ["curl:*"]}},
        call=("run_shell_command", {"command": "curl -s http://127.0.0.1:9/"}),
    )
    assert r.results and "denied by policy" in r.results[0]
    r = run(
        "gemini",
        repo,
        {"paths": {"deny": ["./secrets"]}},
        call=("read_file", {"file_path": "PROJ/secrets/x.txt"}),
    )
    assert r.results and "denied by policy" in r.results[0]
    assert "TOPSECRET" not in " ".join(r.results)


def test_gemini_bare_and_glob_path_denies_hold_and_spare_other_files(repo: Path) -> None:
    # Issue 19: a bare name once became a pattern that denied every absolute path (and
    # gemini silently drops an argsPattern its ReDoS check dislikes).
    (repo / "src" / "creds.txt").write_text("TOPSECRET\n")
    (repo / "k.pem").write_text("TOPSECRET\n")
    (repo / "src" / "ok.txt").write_text("PLAIN\n")
    policy = {"paths": {"deny": ["creds.txt", "*.pem", "./secrets/*.txt"]}}
    for path in ("PROJ/src/creds.txt", "k.pem", "secrets/x.txt"):
        denied = run("gemini", repo, policy, call=("read_file", {"file_path": path}))
        assert denied.results and "denied by policy" in denied.results[0], path
        assert "TOPSECRET" not in " ".join(denied.results)
    allowed = run("gemini", repo, policy, call=("read_file", {"file_path": "PROJ/src/ok.txt"}))
    assert allowed.results and "PLAIN" in allowed.results[0]


def test_gemini_strict_mode(repo: Path) -> None:
    ok = run("gemini", repo, {"tools": {"allow": ["read", "glob"]}}, strict=True)
    assert sorted(ok.tools) == ["glob", "read_file"]
    refused = run("gemini", repo, {"paths": {"write": {"allow": ["./src"]}}}, strict=True)
    assert refused.proc.returncode == 3 and "paths.write.allow (none)" in refused.proc.stderr


# -- OpenCode --------------------------------------------------------------------------------


def test_opencode_allow_list_and_mcp_filter(repo: Path) -> None:
    r = run("opencode", repo, ALLOW_READS, servers=("alpha", "beta"))
    assert sorted(r.tools) == ["alpha_alpha_echo", "glob", "grep", "read"]
    assert not (repo / "AGENTS.md").exists()


def test_opencode_deny_list_and_command_rules(repo: Path) -> None:
    # A project opencode.json that re-allows them does not win over the policy.
    (repo / "opencode.json").write_text(
        '{"permission": {"bash": "allow", "webfetch": "allow"}, "tools": {"bash": true}}'
    )
    r = run("opencode", repo, {"tools": {"deny": ["bash", "webfetch"]}})
    assert {"read", "edit", "write", "glob", "grep"} <= set(r.tools)
    assert not {"bash", "webfetch"} & set(r.tools)
    r = run(
        "opencode",
        repo,
        {"commands": {"deny": ["curl:*"]}},
        call=("bash", {"command": "curl -s http://127.0.0.1:9/", "description": "x"}),
    )
    assert r.results and "prevents you from using this specific tool call" in r.results[0]


def test_opencode_strict_mode(repo: Path) -> None:
    ok = run("opencode", repo, {"tools": {"allow": ["read", "grep"]}}, strict=True)
    assert sorted(ok.tools) == ["grep", "read"]
    refused = run("opencode", repo, {"paths": {"deny": ["./secrets"]}}, strict=True)
    assert refused.proc.returncode == 3 and "paths.read.deny (none)" in refused.proc.stderr
