"""One invalid persona does not stop the fleet (issue 14): list, status, run and serve
work for the valid personas and report the broken one; only ``check`` exits non-zero."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from charter.cli import cli

GOOD = """
[[personas]]
name = "good"
description = "valid"
entry_workflow = "w.py:run"
autonomy_tier = "act_auto"
receipt_policy = "optional"
tools = ["read"]
triggers = ["test.go"]
schedules = ["*/30 * * * *"]
"""
BAD = """
[[personas]]
name = "broken"
description = "an error in its own declaration"
entry_workflow = "w.py:run"
autonomy_tier = "act_sometimes"
receipt_policy = "optional"
tools = ["read"]
runtime = { max_concurrency = 0 }
"""


def _project(tmp_path: Path, text: str) -> Path:
    (tmp_path / "charter.toml").write_text(text)
    (tmp_path / "w.py").write_text("def run(ctx):\n    return {'ok': True}\n")
    return tmp_path


def _cli(root: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [*args, "--manifest", str(root)], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _state(root: Path) -> tuple[str, str]:
    return "--state-dir", str(root / "state")


def test_valid_personas_keep_working_beside_a_broken_one(tmp_path: Path) -> None:
    root = _project(tmp_path, GOOD + BAD)
    code, out, err = _cli(root, "persona", "list", "--json")
    assert code == 0, out + err
    data = json.loads(out)
    assert [p["name"] for p in data["personas"]] == ["good"]
    errors = data["invalid_personas"]["broken"]
    assert [e["field_path"] for e in errors] == [
        "personas[1].autonomy_tier",
        "personas[1].runtime.max_concurrency",
    ]
    assert "act_sometimes" in errors[0]["message"]
    code, out, err = _cli(root, "persona", "list")
    assert code == 0 and "INVALID" in out and "personas[1].autonomy_tier" in err

    assert _cli(root, "persona", "check")[0] == 1  # check alone fails on it

    code, out, _ = _cli(root, "persona", "status", "good", *_state(root), "--json")
    assert code == 0 and json.loads(out)["lifecycle"] == "inactive"
    code, out, _ = _cli(root, "persona", "status", "broken", *_state(root), "--json")
    assert code == 2
    failure = json.loads(out)["error"]
    assert (
        failure["kind"] == "manifest_invalid"
        and "personas[1].autonomy_tier" in (failure["message"])
    )

    code, out, _ = _cli(root, "persona", "run", "good", *_state(root), "--json")
    assert code == 0 and json.loads(out)["result"] == {"ok": True}
    code, out, _ = _cli(root, "persona", "run", "broken", *_state(root), "--json")
    assert code == 2 and json.loads(out)["error"]["kind"] == "manifest_invalid"

    code, out, err = _cli(root, "serve", "--once", *_state(root), "--at", "2026-11-21T09:30:05Z")
    assert code == 0, out + err
    assert "persona broken left out, it does not validate" in out
    assert "schedule good schedule:good:2026-11-21T09:30Z -> completed" in out


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (GOOD + BAD.replace("[[personas]]", "[[personas]"), "TOML syntax"),
        (GOOD + '\n[[handoff_routes]]\nid = "r"\nroute = []\n', "a broken route"),
    ],
)
def test_errors_of_the_whole_project_still_refuse_everything(
    tmp_path: Path, text: str, why: str
) -> None:
    root = _project(tmp_path, text)
    code, out, _ = _cli(root, "persona", "status", "good", *_state(root), "--json")
    assert code == 2, why
    assert json.loads(out)["error"]["kind"] == "manifest_invalid"
    code, out, _ = _cli(root, "persona", "run", "good", *_state(root), "--json")
    assert code == 2, why


def test_a_broken_persona_folder_is_left_out_alone(tmp_path: Path) -> None:
    root = _project(tmp_path, GOOD)
    folder = tmp_path / ".personas" / "folded"
    folder.mkdir(parents=True)
    (folder / "AGENTS.md").write_text("# folded\n")
    (folder / "persona.json").write_text('{"policy": {"paths": 7}}')
    code, out, err = _cli(root, "persona", "list", "--json")
    assert code == 0, out + err
    data = json.loads(out)
    assert [p["name"] for p in data["personas"]] == ["good"]
    assert list(data["invalid_personas"]) == ["folded"]
    code, out, _ = _cli(root, "persona", "run", "good", *_state(root), "--json")
    assert code == 0
