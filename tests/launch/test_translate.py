"""Policy translation, argument layering and strict mode, through `print-policy --json` and
`launch --dry-run` (the real entry points). What the real CLIs do with these arguments is
checked in test_real_clis.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .conftest import charter, env_with, make_persona, plan_json, write


def _policy_args(plan: dict[str, Any]) -> list[str]:
    return list(plan["args"]["policy"])


def test_claude_allow_list_uses_real_names_and_policy_args_come_last(project: Path) -> None:
    make_persona(
        project / ".personas",
        "p",
        policy={"tools": {"allow": ["bash", "read"], "deny": ["websearch"]}},
        defaults={"claude": ["--permission-mode", "bypassPermissions", "--model", "sonnet"]},
    )
    user = [
        "-p",
        "hi",
        "--permission-mode",
        "bypassPermissions",
        "--allowed-tools=Bash",
        "--disallowedTools",
        "X",
        "Y",
        "--settings",
        "mine.json",
        "--verbose",
    ]
    plan = plan_json("claude", "p", "--", *user, cwd=project)
    argv = plan["argv"]
    assert "--tools=Bash,Read" in argv
    assert "" not in argv
    filtered = [" ".join(f["args"]) for f in plan["args"]["filtered"]]
    assert filtered == [
        "--permission-mode bypassPermissions",  # from the persona's defaults
        "--permission-mode bypassPermissions",
        "--allowed-tools=Bash",
        "--disallowedTools X Y",
        "--settings mine.json",
    ]
    assert plan["args"]["filtered"][0]["source"] == "defaults"
    tail = argv[1:]
    assert tail[:5] == ["--model", "sonnet", "-p", "hi", "--verbose"]
    assert tail[5:] == _policy_args(plan)
    assert all(
        a.startswith("--") and ("=" in a or a == "--strict-mcp-config") for a in _policy_args(plan)
    )
    assert "--permission-mode=default" in argv  # act_with_approval: the CLI's prompts
    element = {e["element"]: e for e in plan["elements"]}
    assert element["tools.allow"]["strength"] == "strong"


def test_policy_args_go_before_a_user_terminator(project: Path) -> None:
    make_persona(project / ".personas", "p", policy={"tools": {"deny": ["webfetch"]}})
    plan = plan_json("claude", "p", "--", "-p", "--", "--not-a-flag", cwd=project)
    argv = plan["argv"]
    i = argv.index("--")
    assert argv[i:] == ["--", "--not-a-flag"]
    assert "--disallowedTools=WebFetch" in argv[:i]


def test_no_policy_keeps_yolo_defaults_and_user_flags(project: Path) -> None:
    make_persona(project / ".personas", "free")
    env = env_with(IS_SANDBOX="1")
    plan = plan_json("claude", "free", cwd=project, env=env)
    assert plan["has_policy"] is False
    assert plan["argv"][1:] == ["--permission-mode=bypassPermissions"]
    plan = plan_json("claude", "free", "--", "--permission-mode", "plan", cwd=project, env=env)
    assert plan["argv"][1:] == ["--permission-mode", "plan"]  # the user overrides a default
    codex = plan_json("codex", "free", cwd=project)
    assert "--full-auto" not in codex["argv"]  # removed from codex 0.169
    assert "--sandbox=workspace-write" in codex["argv"]


def test_yolo_defaults_are_suppressed_when_a_policy_exists(project: Path) -> None:
    make_persona(project / ".personas", "p", policy={"tools": {"deny": ["webfetch"]}})
    plan = plan_json("claude", "p", cwd=project, env=env_with(IS_SANDBOX="1"))
    assert "--permission-mode=bypassPermissions" not in plan["argv"]
    codex = plan_json("codex", "p", cwd=project)
    assert codex["args"]["defaults"] == []


def test_claude_paths_absolute_need_double_slash(project: Path, tmp_path: Path) -> None:
    secret = tmp_path / "vault"
    secret.mkdir()
    make_persona(
        project / ".personas",
        "p",
        policy={"paths": {"deny": [str(secret), "./secrets/**", "*.pem"]}},
    )
    plan = plan_json("claude", "p", cwd=project)
    (settings_path,) = [p for p in plan["files"] if p.endswith("claude-settings.json")]
    deny = json.loads(plan["files"][settings_path])["permissions"]["deny"]
    real = str(secret.resolve())
    assert f"Read(/{real})" in deny and f"Read(/{real}/**)" in deny
    assert f"Read(/{project.resolve()}/secrets/**)" in deny
    assert "Read(**/*.pem)" in deny
    assert f"--settings={settings_path}" in plan["argv"]


def test_tier_maps_to_permission_modes(project: Path) -> None:
    rows = []
    for name, tier in (
        ("s", "shadow"),
        ("g", "suggest"),
        ("a", "act_with_approval"),
        ("x", "act_auto"),
    ):
        rows.append(
            f'[[personas]]\nname = "{name}"\ndescription = "d"\nentry_workflow = "m.x:run"\n'
            f'tools = ["read", "bash", "edit"]\nautonomy_tier = "{tier}"\n'
            'receipt_policy = "optional"\n'
        )
    write(project / "charter.toml", "\n".join(rows))
    expect = {
        "claude": {"s": "plan", "g": "default", "a": "default", "x": "dontAsk"},
        "gemini": {"s": "plan", "g": "default", "a": "default", "x": "yolo"},
    }
    for tool, modes in expect.items():
        for name, mode in modes.items():
            assert plan_json(tool, name, cwd=project)["permission_mode"] == mode
    codex = {n: plan_json("codex", n, cwd=project) for n in "sx"}
    assert "--sandbox=read-only" in codex["s"]["argv"]
    assert '--config=approval_policy="never"' in codex["x"]["argv"]
    opencode = plan_json("opencode", "x", cwd=project)
    config = json.loads(opencode["environment"]["OPENCODE_CONFIG_CONTENT"])
    assert config["permission"]["bash"] == "allow" and config["permission"]["*"] == "deny"


def test_codex_translation_and_strict_filtering(project: Path) -> None:
    (project / "src").mkdir()
    make_persona(
        project / ".personas",
        "p",
        policy={
            "tools": {"deny": ["websearch", "task"]},
            "paths": {"write": {"allow": ["./src", "./does-not-exist"]}},
            "network": {"deny": ["*"]},
        },
        defaults={"codex": ["--yolo", "-m", "gpt-x"]},
    )
    user = [
        "-s",
        "danger-full-access",
        "--sandbox=danger-full-access",
        "-sdanger-full-access",
        "-c",
        "sandbox_mode=danger-full-access",
        "--config=web_search=live",
        "-c",
        'model="o3"',
        "--dangerously-bypass-approvals-and-sandbox",
        "--full-auto",
        "--search",
        "--enable",
        "shell_tool",
        "--add-dir",
        "/",
        "exec",
        "hi",
    ]
    # codex's own translation (charter's sandbox around it is checked below)
    plan = plan_json("codex", "p", "--sandbox", "never", "--", *user, cwd=project)
    argv = plan["argv"]
    filtered = {" ".join(f["args"]) for f in plan["args"]["filtered"]}
    assert filtered == {
        "--yolo",
        "-s danger-full-access",
        "--sandbox=danger-full-access",
        "-sdanger-full-access",
        "-c sandbox_mode=danger-full-access",
        "--config=web_search=live",
        "--dangerously-bypass-approvals-and-sandbox",
        "--full-auto",
        "--search",
        "--enable shell_tool",
        "--add-dir /",
    }
    assert argv[1:7] == ["-m", "gpt-x", "-c", 'model="o3"', "exec", "hi"]
    assert '--config=web_search="disabled"' in argv
    assert "--disable=multi_agent" in argv
    assert "--sandbox=workspace-write" in argv
    src = str((project / "src").resolve())
    assert f'--config=sandbox_workspace_write.writable_roots=["{src}"]' in argv
    assert "--config=sandbox_workspace_write.network_access=false" in argv
    assert not any("does-not-exist" in a for a in argv)
    element = {e["element"]: e for e in plan["elements"]}
    assert "do not exist" in element["paths.write.allow"]["reason"]
    assert element["network.deny"]["strength"] == "strong"
    # by default the partial write roots put codex in charter's sandbox; codex's own
    # bubblewrap cannot start inside it, so it is switched off and charter's holds all
    nested = plan_json("codex", "p", "--", *user, cwd=project)
    argv = nested["argv"]
    assert "--sandbox=danger-full-access" in argv and "--sandbox=workspace-write" not in argv
    assert not any(a.startswith("--config=sandbox_workspace_write.") for a in argv)
    element = {e["element"]: e for e in nested["elements"]}
    held = {k: (element[k]["strength"], element[k]["enforced_by"]) for k in element}
    assert held["paths.write.allow"] == ("strong", "sandbox")
    assert held["network.deny"] == ("strong", "both")  # + codex's web_search switch


def test_gemini_admin_policy_and_filtering(project: Path) -> None:
    make_persona(project / ".personas", "p", policy={"tools": {"allow": ["read", "glob", "grep"]}})
    user = [
        "-p",
        "hi",
        "--yolo",
        "-y",
        "--approval-mode",
        "yolo",
        "--approval-mode=yolo",
        "--allowed-tools",
        "run_shell_command",
        "--admin-policy",
        "mine.toml",
        "-o",
        "json",
    ]
    plan = plan_json("gemini", "p", "--", *user, cwd=project)
    assert plan["args"]["user"] == ["-p", "hi", "-o", "json"]
    (policy_path,) = [p for p in plan["files"] if p.endswith("gemini-policy.toml")]
    text = plan["files"][policy_path]
    assert '"run_shell_command"' in text and 'decision = "deny"' in text
    assert 'toolName = "*"' in text
    assert 'toolName = ["read_file", "grep_search", "glob"]' in text
    assert f"--admin-policy={policy_path}" in plan["argv"]
    assert "GEMINI_CLI_SYSTEM_SETTINGS_PATH" not in plan["environment"]


def test_opencode_config_merges_with_the_users(project: Path) -> None:
    make_persona(project / ".personas", "p", policy={"tools": {"allow": ["read", "glob"]}})
    user_config = {"model": "fake/fake-model", "permission": {"bash": "allow"}}
    env = env_with(OPENCODE_CONFIG_CONTENT=json.dumps(user_config))
    plan = plan_json("opencode", "p", cwd=project, env=env)
    config = json.loads(plan["environment"]["OPENCODE_CONFIG_CONTENT"])
    assert config["model"] == "fake/fake-model"
    perm = config["permission"]
    assert perm["*"] == "deny" and perm["bash"] == "deny" and perm["webfetch"] == "deny"
    assert perm["read"] == "allow" and perm["glob"] == "allow"


def test_mcp_injection_per_tool_and_no_mcp(project: Path) -> None:
    servers = {
        "alpha": {"command": "python3", "args": ["srv.py", "alpha"]},
        "beta": {"command": "python3", "args": ["srv.py", "beta"]},
    }
    make_persona(project / ".personas", "p", policy={"mcpServers": {"deny": ["beta"]}}, mcp=servers)
    claude = plan_json("claude", "p", "--", "--mcp-config", "user.json", cwd=project)
    (mcp_path,) = [p for p in claude["files"] if p.endswith("claude-mcp.json")]
    assert list(json.loads(claude["files"][mcp_path])["mcpServers"]) == ["alpha"]
    assert f"--mcp-config={mcp_path}" in claude["argv"]
    assert "user.json" in claude["argv"]  # a user-given config is respected (no allow list)
    assert "--disallowedTools=mcp__beta" in claude["argv"]
    codex = plan_json("codex", "p", cwd=project)
    assert '--config=mcp_servers.alpha.command="python3"' in codex["argv"]
    assert '--config=mcp_servers.alpha.args=["srv.py", "alpha"]' in codex["argv"]
    assert not any("mcp_servers.beta" in a for a in codex["argv"])  # not injected
    # A denied server the user's own codex config defines is switched off.
    codex_home = project.parent / "codex-home"
    write(codex_home / "config.toml", '[mcp_servers.beta]\ncommand = "x"\n')
    codex = plan_json("codex", "p", cwd=project, env=env_with(CODEX_HOME=str(codex_home)))
    assert "--config=mcp_servers.beta.enabled=false" in codex["argv"]
    opencode = plan_json("opencode", "p", cwd=project)
    config = json.loads(opencode["environment"]["OPENCODE_CONFIG_CONTENT"])
    assert config["mcp"]["alpha"]["command"] == ["python3", "srv.py", "alpha"]
    assert "beta" not in config["mcp"] and config["tools"]["beta_*"] is False
    gemini = plan_json("gemini", "p", cwd=project)
    (toml_path,) = [p for p in gemini["files"] if p.endswith("gemini-policy.toml")]
    assert 'toolName = "mcp_beta_*"' in gemini["files"][toml_path]
    none = plan_json("claude", "p", "--no-mcp", cwd=project)
    assert none["mcp_servers"] == [] and not any("claude-mcp.json" in p for p in none["files"])


def test_strict_policy_refuses_naming_each_element(project: Path, fakebin: Path) -> None:
    make_persona(
        project / ".personas",
        "p",
        policy={
            "tools": {"allow": ["bash", "read"]},
            "network": {"deny": ["*"]},
            "commands": {"deny": ["curl:*"]},
        },
    )
    env = env_with(fakebin, FAKE_CLI_CAPTURE=str(project / "never.json"))
    out = charter(
        "launch", "claude", "p", "--strict-policy", "--sandbox", "never", "--", "-p", "hi",
        cwd=project, env=env,
    )  # fmt: skip
    assert out.returncode == 3
    assert "network.deny (partial)" in out.stderr and "curl/wget" in out.stderr
    assert "commands.deny (partial)" in out.stderr
    assert not (project / "never.json").exists()
    shown = charter(
        "print-policy", "claude", "p", "--strict-policy", "--sandbox", "never", cwd=project
    ).stdout
    assert "[FAIL] network.deny" in shown
    # Without --strict-policy the same persona launches (the gaps are reported).
    ok = charter("launch", "claude", "p", "--", "-p", "hi", cwd=project, env=env)
    assert ok.returncode == 0, ok.stderr
    # Codex enforces network.deny with its sandbox but has no command rules.
    codex = charter("launch", "codex", "p", "--strict-policy", "--dry-run", cwd=project)
    assert codex.returncode == 3 and "commands.deny (none)" in codex.stderr


def test_strict_policy_launches_when_everything_is_strong(project: Path, fakebin: Path) -> None:
    make_persona(
        project / ".personas",
        "p",
        policy={"tools": {"allow": ["read", "grep", "glob"]}, "network": {"deny": ["*"]}},
    )
    capture = project.parent / "cap.json"
    env = env_with(fakebin, FAKE_CLI_CAPTURE=str(capture))
    out = charter(
        "launch", "claude", "p", "--strict-policy", "--", "-p", "hi", cwd=project, env=env
    )
    assert out.returncode == 0, out.stderr
    argv = json.loads(capture.read_text())["argv"]
    assert "--tools=Read,Glob,Grep" in argv


@pytest.mark.parametrize("tool", ["claude", "codex", "gemini", "opencode"])
def test_dry_run_prints_argv_and_environment(project: Path, tool: str) -> None:
    make_persona(project / ".personas", "p", policy={"tools": {"deny": ["bash"]}})
    out = charter("launch", tool, "p", "--dry-run", "--", "hi", cwd=project)
    assert out.returncode == 0, out.stderr
    assert "=== Final Arguments ===" in out.stdout and "AGENT_PERSONA_NAME=p" in out.stdout
    assert "CHARTER_PERSONA=p" in out.stdout
    data = json.loads(charter("launch", tool, "p", "--dry-run", "--json", cwd=project).stdout)
    assert data["tool"] == tool and data["environment"]["AGENT_PERSONA_TOOL"] == tool


def test_unknown_tool_is_bad_input(project: Path) -> None:
    make_persona(project / ".personas", "p")
    out = charter("launch", "vim", "p", "--dry-run", cwd=project)
    assert out.returncode == 2 and "unknown tool 'vim'" in out.stderr
