"""One error contract for every persona command (issue 14): under ``--json`` a refusal or
error is one JSON object on stdout, and the exit code says which kind (2 bad input)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

EXAMPLES = str(Path(__file__).parents[2] / "examples" / "personas")

COMMANDS = {
    "status": ["persona", "status", "{p}"],
    "tick": ["persona", "tick", "{p}"],
    "trigger": ["persona", "trigger", "{p}", "--provider", "github", "--kind", "pr_opened"],
    "spend": ["persona", "spend", "{p}", "--cost-usd", "1"],
    "pause": ["persona", "pause", "{p}"],
    "resume": ["persona", "resume", "{p}"],
    "disable": ["persona", "disable", "{p}"],
    "run": ["persona", "run", "{p}"],
    "rollout": ["persona", "rollout", "report", "{p}"],
    "promote": ["persona", "promote", "{p}", "--to", "suggest"],
}


@pytest.fixture
def bad_manifest(tmp_path: Path) -> str:
    path = tmp_path / "charter.toml"
    path.write_text('[[personas]]\nname = "x"\n')
    return str(path)


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(
    ("case", "kind"),
    [
        ("missing_manifest", "manifest_invalid"),
        ("bad_manifest", "manifest_invalid"),
        ("unknown_persona", "unknown_persona"),
        ("bad_at", "bad_input"),
    ],
)
def test_errors_are_json_with_exit_2(
    command: str, case: str, kind: str, bad_manifest: str, tmp_path: Path
) -> None:
    from charter.cli import cli

    manifest, persona, extra = {
        "missing_manifest": (str(tmp_path / "nope" / "charter.toml"), "merge_captain", []),
        "bad_manifest": (bad_manifest, "x", []),
        "unknown_persona": (EXAMPLES, "nobody", []),
        "bad_at": (EXAMPLES, "merge_captain", ["--at", "yesterday"]),
    }[case]
    argv = [a.format(p=persona) for a in COMMANDS[command]]
    argv += ["--manifest", manifest, "--state-dir", str(tmp_path / "state"), *extra, "--json"]
    result = CliRunner().invoke(cli, argv, catch_exceptions=False)
    assert result.exit_code == 2, result.output
    error = json.loads(result.stdout)["error"]
    assert error["kind"] == kind and error["message"]
    assert "Traceback" not in result.output
