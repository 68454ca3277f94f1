"""`charter policy explain|show` through the real entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def charter(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "charter", *args], capture_output=True, text=True, cwd=cwd
    )


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    base = tmp_path / "base.toml"
    base.write_text(
        'tools = ["bash", "read", "github__*"]\nside_effect_level = "process_exec"\n'
        '[commands]\nallow = ["git:*", "npm test"]\ndeny = ["git push --force:*"]\n'
        '[paths]\nallow = ["./"]\ndeny = ["./secrets/**"]\n'
    )
    stage = tmp_path / "stage.json"
    stage.write_text(
        json.dumps({"name": "stage:research", "tools": ["read"], "side_effect_level": "read_only"})
    )
    persona = tmp_path / "persona.json"
    persona.write_text(json.dumps({"defaults": {}, "policy": {"bash": {"deny": ["curl:*"]}}}))
    return {"base": base, "stage": stage, "persona": persona}


def test_explain_allowed(files: dict[str, Path], tmp_path: Path) -> None:
    r = charter(
        "policy",
        "explain",
        "--policy",
        str(files["base"]),
        "--tool",
        "bash",
        "--args",
        '{"command": "git status && npm test"}',
        "--json",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["decision"] == "allow" and out["tool"] == "bash"


def test_explain_denied_names_frame_and_rule(files: dict[str, Path], tmp_path: Path) -> None:
    r = charter(
        "policy",
        "explain",
        "--policy",
        str(files["base"]),
        "--tool",
        "bash",
        "--args",
        '{"command": "timeout 9 git push -f"}',
        "--json",
        cwd=tmp_path,
    )
    assert r.returncode == 3
    out = json.loads(r.stdout)
    assert out["decision"] == "deny"
    assert out["frame"] == {"index": 0, "label": "base", "kind": "file"}
    assert out["dimension"] == "commands" and out["rule"] == "commands.deny: git push --force:*"


def test_explain_stack_text_output(files: dict[str, Path], tmp_path: Path) -> None:
    r = charter(
        "policy",
        "explain",
        "--policy",
        str(files["base"]),
        "--policy",
        str(files["stage"]),
        "--tool",
        "bash",
        "--args",
        '{"command": "git status"}',
        cwd=tmp_path,
    )
    assert r.returncode == 3
    assert r.stdout.startswith("DENY  bash")
    assert "stage:research" in r.stdout and "tools.allow" in r.stdout


def test_explain_side_effect_flag_and_persona_json(files: dict[str, Path], tmp_path: Path) -> None:
    r = charter(
        "policy",
        "explain",
        "--policy",
        str(files["stage"]),
        "--tool",
        "read",
        "--side-effect",
        "network",
        "--json",
        cwd=tmp_path,
    )
    assert r.returncode == 3 and json.loads(r.stdout)["dimension"] == "side_effect_level"
    r = charter(
        "policy",
        "explain",
        "--policy",
        str(files["persona"]),
        "--tool",
        "bash",
        "--args",
        '{"command": "curl x"}',
        "--json",
        cwd=tmp_path,
    )
    assert r.returncode == 3 and json.loads(r.stdout)["rule"] == "commands.deny: curl:*"


def test_explain_paths_against_workspace(files: dict[str, Path], tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    r = charter(
        "policy",
        "explain",
        "--policy",
        str(files["base"]),
        "--tool",
        "read",
        "--args",
        '{"file_path": "secrets/../secrets/k"}',
        "--workspace",
        str(ws),
        "--json",
    )
    assert r.returncode == 3 and json.loads(r.stdout)["dimension"] == "paths.read"


@pytest.mark.parametrize(
    ("content", "suffix", "expected"),
    [
        ('tools = ["a", 3]\n', ".toml", "tools[1]: expected a string, got int"),
        ("tools = [\n", ".toml", "invalid TOML"),
        ('{"side_effect_level": "root"}', ".json", "side_effect_level: expected one of"),
        ('{"tools": ', ".json", "invalid JSON at line 1"),
        (
            '{"policy": {"paths": {"allow": [1]}}}',
            ".json",
            "policy.paths.allow[0]: expected a string",
        ),
        ("[1, 2]", ".json", "expected a table/object"),
    ],
)
def test_bad_policy_files_exit_2_without_traceback(
    tmp_path: Path, content: str, suffix: str, expected: str
) -> None:
    bad = tmp_path / f"bad{suffix}"
    bad.write_text(content)
    r = charter("policy", "explain", "--policy", str(bad), "--tool", "x")
    assert r.returncode == 2
    assert f"{bad}: " in r.stderr and expected in r.stderr
    assert "Traceback" not in r.stderr


def test_bad_arguments_exit_2(files: dict[str, Path]) -> None:
    r = charter("policy", "explain", "--policy", str(files["base"]), "--tool", "x", "--args", "{")
    assert r.returncode == 2 and "--args" in r.stderr and "Traceback" not in r.stderr
    r = charter("policy", "explain", "--policy", str(files["base"]), "--tool", "x", "--args", "[]")
    assert r.returncode == 2 and "JSON object" in r.stderr
    r = charter("policy", "explain", "--policy", "/nonexistent.toml", "--tool", "x")
    assert r.returncode == 2 and "file not found" in r.stderr
    r = charter(
        "policy", "explain", "--policy", str(files["base"]), "--tool", "x", "--side-effect", "root"
    )
    assert r.returncode == 2


def test_bad_input_under_json_is_one_json_error(files: dict[str, Path], tmp_path: Path) -> None:
    base = str(files["base"])
    r = charter("policy", "explain", "--policy", base, "--tool", "x", "--args", "{", "--json")
    assert r.returncode == 2 and r.stderr == ""
    error = json.loads(r.stdout)["error"]
    assert error["kind"] == "bad_input" and error["field_path"] == "--args"
    bad = tmp_path / "bad.toml"
    bad.write_text('tools = "x"\n')
    for command in ("explain", "show"):
        extra = ["--tool", "x"] if command == "explain" else []
        r = charter("policy", command, "--policy", str(bad), *extra, "--json")
        assert r.returncode == 2, r.stderr
        (issue,) = json.loads(r.stdout)["error"]["issues"]
        assert issue["file"] == str(bad) and issue["field_path"] == "tools"


def test_bad_call_input_is_a_denial(files: dict[str, Path]) -> None:
    base = str(files["base"])
    for args in ('{"pth": "secrets/key"}', '{"path": "\\udcff"}', "{}"):
        r = charter("policy", "explain", "--policy", base, "--tool", "read", "--args", args,
                    "--json")  # fmt: skip
        assert r.returncode == 3, (args, r.stdout, r.stderr)
        assert json.loads(r.stdout)["dimension"] == "paths"
    r = charter("policy", "explain", "--policy", base, "--tool", "bash", "--args",
                '{"cmd": "rm -rf /"}', "--json")  # fmt: skip
    assert r.returncode == 3 and "no command argument" in json.loads(r.stdout)["reason"]


def test_show(files: dict[str, Path], tmp_path: Path) -> None:
    r = charter(
        "policy",
        "show",
        "--policy",
        str(files["base"]),
        "--policy",
        str(files["stage"]),
        "--json",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    view = json.loads(r.stdout)
    assert view["tools"]["allow"] == ["read"]
    assert view["side_effect_level"] == "read_only"
    assert view["commands"]["deny"] == ["git push --force:*"]
    assert "env_files" in view["sensitive_paths_denied"]
    text = charter("policy", "show", "--policy", str(files["base"]), cwd=tmp_path)
    assert text.returncode == 0 and "tools: allow bash, read, github__*" in text.stdout


def test_demo_runs(tmp_path: Path) -> None:
    r = charter("demo", "--policy-only", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    steps = json.loads(r.stdout)
    by_step = {s["step"]: s for s in steps}
    assert by_step["read .env (sensitive by default)"]["decision"] == "deny"
    assert by_step["run the tests"]["decision"] == "allow"
