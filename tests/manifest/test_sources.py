"""Discovery (walk-up, .git boundary, folder roots and precedence) and persona folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from charter.manifest import FOLDER_ENTRY_WORKFLOW, AutonomyTier, load_manifest

from .conftest import PERSONA, write


def folder(root: Path, name: str, agents: str = "# x\n\nDoes things.\n") -> Path:
    d = root / name
    write(d / "AGENTS.md", agents)
    return d


def test_walk_up_finds_nearest_manifest(project: Path) -> None:
    write(project / "charter.toml", PERSONA.format(name="alpha"))
    sub = project / "a" / "b"
    sub.mkdir(parents=True)
    manifest = load_manifest(cwd=sub)
    assert manifest.manifest_path == str(project / "charter.toml")
    assert manifest.names == ("alpha",)


def test_walk_up_stops_at_git_root(tmp_path: Path) -> None:
    write(tmp_path / "charter.toml", PERSONA.format(name="outside"))
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    manifest = load_manifest(cwd=repo)
    assert manifest.manifest_path is None and manifest.names == ()


def test_manifest_option_accepts_dir_or_file(project: Path) -> None:
    write(project / "charter.toml", PERSONA.format(name="alpha"))
    assert load_manifest(project).names == ("alpha",)
    assert load_manifest("charter.toml", cwd=project).names == ("alpha",)
    missing = load_manifest(project / "nope.toml")
    assert missing.errors[0].message == "no such file or directory"


def test_empty_directory_is_an_error(tmp_path: Path) -> None:
    [err] = load_manifest(tmp_path, include_global=False).errors
    assert "no charter.toml" in err.message


def test_folder_only_persona_gets_defaults(project: Path) -> None:
    folder(project / ".personas", "helper", agents="# Helper\n\nHelps with docs.\n")
    write(project / ".personas" / "_shared" / "snippet.md", "shared")
    write(project / ".personas" / "README.md", "readme")
    manifest = load_manifest(cwd=project)
    assert manifest.ok, manifest.errors
    [p] = manifest.personas
    assert p.name == "helper" and p.description == "Helps with docs."
    assert p.entry_workflow.raw == FOLDER_ENTRY_WORKFLOW
    assert p.autonomy_tier is AutonomyTier.ACT_WITH_APPROVAL
    assert p.instructions is not None and p.instructions.file_for("claude").endswith("AGENTS.md")
    assert [s.kind for s in p.sources] == ["folder"]


def test_folder_merges_with_manifest_entry(project: Path) -> None:
    write(project / "charter.toml", PERSONA.format(name="alpha"))
    d = folder(project / ".personas", "alpha")
    write(d / "CLAUDE.md", "claude")
    write(
        d / "persona.json",
        """{
      "defaults": {"claude": ["--model", "sonnet"]},
      "mcpServers": {"git": {"command": "git-mcp"}},
      "policy": {"tools": {"deny": ["grep"]}, "mcpServers": {"allow": ["git"]},
                 "bash": {"deny": ["curl:*"]}}
    }""",
    )
    manifest = load_manifest(cwd=project)
    assert manifest.ok, manifest.errors
    [p] = manifest.personas
    assert p.description == "The alpha persona."  # manifest owns the contract
    assert p.instructions is not None
    assert p.instructions.file_for("claude").endswith("CLAUDE.md")
    assert p.instructions.file_for("codex").endswith("AGENTS.md")
    assert p.instructions.mcp_servers == {"git": {"command": "git-mcp"}}
    assert [s.kind for s in p.sources] == ["manifest", "folder"]
    policy = p.effective_policy
    assert policy.tools.deny == ("grep",)  # folder tightens the manifest
    assert policy.tools.allow == (("read", "grep"),)
    assert policy.commands.deny == ("curl:*",)
    assert policy.mcp_servers.allow == (("git",),)


def test_folder_precedence_project_env_home(
    project: Path, tmp_path_factory: pytest.TempPathFactory, _isolated_home: Path
) -> None:
    extra = tmp_path_factory.mktemp("extra")
    folder(project / ".personas", "alpha", agents="project\n")
    folder(extra, "alpha", agents="env\n")
    folder(extra, "beta", agents="env beta\n")
    folder(_isolated_home / ".personas", "beta", agents="home beta\n")
    folder(_isolated_home / ".personas", "gamma", agents="home gamma\n")
    manifest = load_manifest(cwd=project, env={"CHARTER_PERSONA_PATHS": str(extra)})
    assert manifest.ok, manifest.errors
    by = {p.name: p for p in manifest.personas}
    assert by["alpha"].description == "project"
    assert by["beta"].description == "env beta"
    assert by["gamma"].description == "home gamma"
    assert [(s.origin, s.shadowed) for s in by["alpha"].sources] == [
        ("project", False),
        ("CHARTER_PERSONA_PATHS", True),
    ]
    assert [o for _, o in manifest.persona_roots] == ["project", "CHARTER_PERSONA_PATHS", "home"]
    local = load_manifest(
        cwd=project, env={"CHARTER_PERSONA_PATHS": str(extra)}, include_global=False
    )
    assert local.names == ("alpha",)


def test_folder_errors(project: Path) -> None:
    (project / ".personas" / "noagents").mkdir(parents=True)
    d = folder(project / ".personas", "badjson")
    write(d / "persona.json", '{"policy": {"tools": {"allow": [1]}}, "model": "x"}')
    d2 = folder(project / ".personas", "syntax")
    write(d2 / "persona.json", '{"policy": ')
    folder(project / ".personas", "Bad Name")
    errors = {
        (Path(e.manifest_path).name, e.field_path, e.message.split(";")[0])
        for e in load_manifest(cwd=project).errors
    }
    assert (
        "noagents",
        "",
        "missing AGENTS.md (required in a persona folder: the instructions)",
    ) in errors
    assert ("persona.json", "policy.tools.allow[0]", "expected a string, got int") in errors
    assert any(f == "model" and "unknown persona.json field" in m for _, f, m in errors)
    assert any(n == "Bad Name" and "persona names use" in m for n, _, m in errors)
    syntax = [e for e in load_manifest(cwd=project).errors if "invalid JSON" in e.message]
    assert syntax and syntax[0].line == 1 and syntax[0].column is not None


def test_explicit_persona_folder_path(project: Path) -> None:
    d = folder(project / "somewhere", "solo")
    manifest = load_manifest(d, include_global=False)
    assert manifest.names == ("solo",)


def test_directory_of_standalone_files(tmp_path: Path) -> None:
    write(tmp_path / "a.toml", PERSONA.format(name="a").replace("[[personas]]\n", ""))
    write(tmp_path / "b.toml", PERSONA.format(name="b").replace("[[personas]]\n", ""))
    assert load_manifest(tmp_path, include_global=False).names == ("a", "b")


def test_handoff_to_folder_persona_is_known(project: Path) -> None:
    write(
        project / "charter.toml",
        PERSONA.format(name="alpha") + 'handoffs = ["helper", "persona://helper"]\n',
    )
    folder(project / ".personas", "helper")
    assert load_manifest(cwd=project).ok


STANDALONE = PERSONA.format(name="watcher").replace("[[personas]]\n", "")


def test_standalone_file_with_every_persona_field(tmp_path: Path) -> None:
    # top-level triggers/schedules/handoffs are persona fields here, not charter.toml tables
    text = (
        'triggers = ["github.pr_opened", "github.review_requested"]\n'
        'schedules = ["0 9 * * 1-5"]\n'
        'handoffs = ["human:maintainers"]\n' + STANDALONE
    )
    file = write(tmp_path / "watcher.toml", text)
    manifest = load_manifest(file, include_global=False)
    assert manifest.errors == ()
    [persona] = manifest.personas
    assert [str(t) for t in persona.triggers] == ["github.pr_opened", "github.review_requested"]
    assert persona.schedules == ("0 9 * * 1-5",)


def test_manifest_only_keys_still_make_a_manifest(tmp_path: Path) -> None:
    file = write(tmp_path / "team.toml", PERSONA.format(name="a"))
    assert load_manifest(file, include_global=False).names == ("a",)


def test_json_persona_file(tmp_path: Path) -> None:
    data = {
        "name": "jsonic",
        "description": "A persona written as JSON.",
        "entry_workflow": "pkg.flows:run",
        "tools": ["read"],
        "triggers": ["github.pr_opened"],
        "autonomy_tier": "suggest",
        "receipt_policy": "required",
    }
    file = write(tmp_path / "jsonic.json", json.dumps(data))
    manifest = load_manifest(file, include_global=False)
    assert manifest.errors == ()
    assert manifest.names == ("jsonic",)
    assert manifest.personas[0].manifest_source == str(file)


def test_json_persona_file_errors_name_line_and_shape(tmp_path: Path) -> None:
    broken = write(tmp_path / "broken.json", '{\n  "name": "x",\n  "tools": [\n}')
    [err] = load_manifest(broken, include_global=False).errors
    assert err.message.startswith("invalid JSON") and err.line == 4
    listed = write(tmp_path / "list.json", "[]")
    [err] = load_manifest(listed, include_global=False).errors
    assert "expected a JSON object" in err.message
    typed = write(
        tmp_path / "typed.json", json.dumps({**json.loads(STANDALONE_JSON), "tools": "x"})
    )
    errors = load_manifest(typed, include_global=False).errors
    assert [(e.field_path, e.message) for e in errors] == [
        ("tools", "expected a list of strings, got a string")
    ]


STANDALONE_JSON = json.dumps(
    {
        "name": "typed",
        "description": "d",
        "entry_workflow": "pkg.flows:run",
        "autonomy_tier": "suggest",
        "receipt_policy": "required",
    }
)
