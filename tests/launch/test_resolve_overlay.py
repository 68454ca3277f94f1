"""Persona resolution (`charter which`) and overlay composition (`charter print-overlay`)."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import charter, env_with, make_persona, write


def test_repo_wins_over_home_by_default_and_prefer_home_flips(project: Path) -> None:
    home = Path(env_with()["HOME"])
    make_persona(project / ".personas", "rev", "REPO {{persona}}\n")
    make_persona(home / ".personas", "rev", "HOME {{persona}}\n")
    out = charter("print-overlay", "codex", "rev", cwd=project)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "REPO rev\n"
    which = json.loads(charter("which", "rev", "--json", cwd=project).stdout)
    assert which["path"] == str(project / ".personas" / "rev")
    assert any("shadowed" in line and str(home) in line for line in which["why"])

    flipped = charter("print-overlay", "codex", "rev", "--prefer", "home", cwd=project)
    assert flipped.stdout == "HOME rev\n"
    env = env_with(CHARTER_PERSONA_PREFER="home")
    which = json.loads(charter("which", "rev", "--json", cwd=project, env=env).stdout)
    assert which["path"] == str(home / ".personas" / "rev")
    assert any("--prefer home" in line for line in which["why"])


def test_charter_persona_paths_and_unknown_persona(project: Path, tmp_path: Path) -> None:
    extra = tmp_path / "team-personas"
    make_persona(extra, "ops", "OPS\n")
    env = env_with(CHARTER_PERSONA_PATHS=str(extra))
    out = charter("which", "ops", cwd=project, env=env)
    assert out.returncode == 0
    assert str(extra / "ops") in out.stdout and "CHARTER_PERSONA_PATHS" in out.stdout
    missing = charter("which", "nobody", cwd=project)
    assert missing.returncode == 1
    assert "unknown persona 'nobody'" in missing.stderr


def test_charter_toml_persona_without_folder_gets_a_description_overlay(project: Path) -> None:
    write(
        project / "charter.toml",
        '[[personas]]\nname = "bot"\ndescription = "Keeps the build green."\n'
        'entry_workflow = "pkg.mod:run"\ntools = ["read"]\nautonomy_tier = "suggest"\n'
        'receipt_policy = "optional"\n',
    )
    out = charter("print-overlay", "claude", "bot", cwd=project)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "# bot\n\nKeeps the build green.\n"
    which = charter("which", "bot", cwd=project).stdout
    assert "manifest" in which and "charter.toml" in which


def test_tool_specific_file_wins_and_agents_md_is_the_fallback(project: Path) -> None:
    make_persona(
        project / ".personas",
        "p",
        "GENERIC\n",
        claude="CLAUDE SPECIFIC\n",
        gemini="GEMINI SPECIFIC\n",
    )
    assert charter("print-overlay", "claude", "p", cwd=project).stdout == "CLAUDE SPECIFIC\n"
    assert charter("print-overlay", "gemini", "p", cwd=project).stdout == "GEMINI SPECIFIC\n"
    assert charter("print-overlay", "codex", "p", cwd=project).stdout == "GENERIC\n"
    assert charter("print-overlay", "opencode", "p", cwd=project).stdout == "GENERIC\n"


def test_meta_file_top_bottom_and_no_meta(project: Path) -> None:
    make_persona(project / ".personas", "p", "BODY of {{persona}}\n")
    write(project / ".personas" / ".shared" / "meta.AGENTS.md", "META for {{tool}}\n")
    top = charter("print-overlay", "codex", "p", cwd=project).stdout
    assert top == "META for codex\n\nBODY of p\n"
    bottom = charter("print-overlay", "claude", "p", "--meta", "bottom", cwd=project).stdout
    assert bottom == "BODY of p\n\nMETA for claude\n"
    none = charter("print-overlay", "claude", "p", "--no-meta", cwd=project).stdout
    assert none == "BODY of p\n"


def test_includes_of_files_and_personas_with_substitution(project: Path) -> None:
    personas = project / ".personas"
    write(personas / "_shared" / "safety.md", 'SAFETY <!-- include {"file": "deep.md"} -->\n')
    write(personas / "_shared" / "deep.md", "DEEP {{persona}}\n")
    make_persona(personas, "base", "BASE RULES\n", claude="BASE FOR CLAUDE\n")
    make_persona(
        personas,
        "p",
        '# {{persona}}\n<!-- include {"file": "../_shared/safety.md"} -->\n'
        '<!-- include {"persona": "base"} -->\n',
    )
    out = charter("print-overlay", "codex", "p", cwd=project)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "# p\nSAFETY DEEP p\nBASE RULES\n"
    # The included persona's tool-specific file is used for that tool.
    assert "BASE FOR CLAUDE" in charter("print-overlay", "claude", "p", cwd=project).stdout


def test_includes_found_in_the_shared_folder(project: Path) -> None:
    """agent-persona's init template: snippets in .personas/.shared/, included by name."""
    personas = project / ".personas"
    write(personas / ".shared" / "snippets" / "git.md", "GIT RULES for {{tool}}\n")
    write(personas / "_shared" / "style.md", "STYLE\n")
    make_persona(
        personas,
        "p",
        '<!-- include {"file": "snippets/git.md"} -->\n<!-- include {"file": "style.md"} -->\n',
    )
    out = charter("print-overlay", "codex", "p", cwd=project)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "GIT RULES for codex\nSTYLE\n"
    # a file next to the including one wins over the shared one
    write(personas / "p" / "style.md", "LOCAL STYLE\n")
    assert charter("print-overlay", "codex", "p", cwd=project).stdout.endswith("LOCAL STYLE\n")


def test_include_cycles_and_bad_directives_are_clear_errors(project: Path) -> None:
    personas = project / ".personas"
    make_persona(personas, "a", '<!-- include {"persona": "b"} -->\n')
    make_persona(personas, "b", '<!-- include {"persona": "a"} -->\n')
    out = charter("print-overlay", "codex", "a", cwd=project)
    assert out.returncode == 2
    assert "include cycle" in out.stderr and "persona:a" in out.stderr and "persona:b" in out.stderr
    write(personas / "_shared" / "self.md", '<!-- include {"file": "self.md"} -->\n')
    make_persona(personas, "c", '<!-- include {"file": "../_shared/self.md"} -->\n')
    out = charter("print-overlay", "codex", "c", cwd=project)
    assert out.returncode == 2 and "include cycle" in out.stderr
    make_persona(personas, "d", '<!-- include {"file": "missing.md"} -->\n')
    out = charter("print-overlay", "codex", "d", cwd=project)
    assert out.returncode == 2 and "'missing.md' not found; looked in:" in out.stderr
    assert str(personas / "d" / "missing.md") in out.stderr  # every place, in order
    assert str(personas / ".shared" / "missing.md") in out.stderr
    make_persona(personas, "e", "<!-- include {nope} -->\n")
    out = charter("print-overlay", "codex", "e", cwd=project)
    assert out.returncode == 2 and "not JSON" in out.stderr and "AGENTS.md:1" in out.stderr
    # A launch refuses the same way, before starting anything.
    out = charter("launch", "codex", "a", "--dry-run", cwd=project)
    assert out.returncode == 2 and "include cycle" in out.stderr


def test_unknown_placeholder_warns_and_is_left(project: Path) -> None:
    make_persona(project / ".personas", "p", "Hi {{persona}} {{unknown_thing}}\n")
    out = charter("print-overlay", "codex", "p", cwd=project)
    assert out.stdout == "Hi p {{unknown_thing}}\n"
    assert "unknown placeholder {{unknown_thing}}" in out.stderr


def test_persona_list_shows_folder_personas(project: Path) -> None:
    make_persona(project / ".personas", "folder_only", "Reviews things carefully.\n")
    out = charter("persona", "list", "--json", cwd=project)
    assert out.returncode == 0, out.stderr
    assert "folder_only" in out.stdout


def test_file_includes_stay_inside_the_persona_folders(project: Path, tmp_path: Path) -> None:
    """Hostile: an absolute path, a ``../`` escape and a symlink out of ``.personas`` are
    errors naming the file (nothing of it reaches the overlay); the allowed twins, a
    ``../_shared`` snippet and a file next to the persona, still work."""
    personas = project / ".personas"
    secret = write(project / "secret.md", "REPO SECRET\n")
    outside = write(tmp_path / "elsewhere" / "notes.md", "OUTSIDE\n")
    write(personas / "_shared" / "safety.md", "SAFETY\n")
    write(personas / "ok" / "local.md", "LOCAL\n")
    make_persona(
        personas,
        "ok",
        '<!-- include {"file": "../_shared/safety.md"} -->\n'
        '<!-- include {"file": "local.md"} -->\n',
    )
    out = charter("print-overlay", "codex", "ok", cwd=project)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "SAFETY\nLOCAL\n"
    (personas / "_shared" / "link.md").symlink_to(outside)
    hostile = {
        "abs": (f'{{"file": "{secret}"}}', "is an absolute path"),
        "home": ('{"file": "~/x.md"}', "is an absolute path"),
        "up": ('{"file": "../../secret.md"}', "outside the persona folders"),
        "link": ('{"file": "../_shared/link.md"}', "outside the persona folders"),
    }
    for name, (directive, message) in hostile.items():
        make_persona(personas, name, f"<!-- include {directive} -->\n")
        out = charter("print-overlay", "codex", name, cwd=project)
        assert out.returncode == 2, (name, out.stdout, out.stderr)
        assert message in out.stderr and "AGENTS.md:1" in out.stderr, (name, out.stderr)
        assert "SECRET" not in out.stdout + out.stderr and "OUTSIDE" not in out.stdout
        launch = charter("launch", "codex", name, "--dry-run", cwd=project)
        assert launch.returncode == 2 and message in launch.stderr


def test_an_invalid_persona_json_is_reported_as_invalid_not_unknown(project: Path) -> None:
    personas = project / ".personas"
    folder = make_persona(personas, "bad")
    cases = {
        '{"defaults": 3}': "defaults: expected an object, got an integer",
        '{"policy": {"tools": {"alow": ["read"]}}}': "policy.tools.alow: unknown field",
        '{"policy": 1,': "invalid JSON",
    }
    for text, field in cases.items():
        (folder / "persona.json").write_text(text)
        for cmd in (("print-policy", "claude", "bad"), ("launch", "claude", "bad", "--dry-run")):
            out = charter(*cmd, cwd=project)
            assert out.returncode == 2, out.stderr
            assert f"persona 'bad' in {folder} is invalid" in out.stderr, out.stderr
            assert f"{folder / 'persona.json'}" in out.stderr and field in out.stderr
            assert "unknown persona" not in out.stderr
    # the twins: fixed, it launches; a name with no folder at all is unknown
    (folder / "persona.json").write_text('{"policy": {"tools": {"allow": ["read"]}}}')
    assert charter("print-policy", "claude", "bad", cwd=project).returncode == 0
    missing = charter("print-policy", "claude", "nobody", cwd=project)
    assert missing.returncode == 2 and "unknown persona 'nobody'" in missing.stderr
