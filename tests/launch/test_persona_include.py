"""persona.json ``include`` (issue 19 item 3): shared policy fragments, as teams write them."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import charter, make_persona, plan_json, write

BASE = {
    "policy": {
        "paths": {"deny": ["./secrets/**"]},
        "bash": {"allow": ["git:*"], "deny": ["curl:*"]},
    },
    "defaults": {"*": ["--from-fragment"]},
}


def persona_json(project: Path, name: str, data: dict[str, object]) -> Path:
    make_persona(project / ".personas", name)
    return write(project / ".personas" / name / "persona.json", json.dumps(data))


def effective(project: Path, name: str) -> dict[str, object]:
    out = charter("persona", "inspect", name, "--json", cwd=project)
    assert out.returncode == 0, out.stdout + out.stderr
    data: dict[str, object] = json.loads(out.stdout)["effective_policy"]
    return data


def test_fragment_from_shared_is_merged_under_the_persona(project: Path) -> None:
    write(project / ".personas" / ".shared" / "base.json", json.dumps(BASE))
    persona_json(
        project,
        "p",
        {"include": "base.json", "policy": {"bash": {"allow": ["npm test"], "deny": ["wget:*"]}}},
    )
    text = json.dumps(effective(project, "p"))
    for rule in ("./secrets/**", "curl:*", "wget:*", "git:*", "npm test"):
        assert rule in text, rule
    plan = plan_json("claude", "p", cwd=project)
    assert plan["args"]["defaults"][0] == "--from-fragment"
    assert "Bash(curl:*)" in json.dumps(plan["files"])  # claude's settings deny it


def test_nested_includes_and_the_persona_folder_first(project: Path) -> None:
    write(
        project / ".personas" / "_shared" / "deep.json",
        json.dumps({"policy": {"network": {"deny": ["*"]}}}),
    )
    write(project / ".personas" / ".shared" / "mid.json", json.dumps({"include": ["deep.json"]}))
    persona_json(project, "p", {"include": ["mid.json"]})
    assert "network" in effective(project, "p")


def test_missing_escaping_and_cyclic_includes_are_clear_errors(
    project: Path, tmp_path: Path
) -> None:
    persona_json(project, "missing", {"include": "nope.json"})
    out = charter("persona", "check", cwd=project)
    assert out.returncode != 0 and "'nope.json' not found; looked in:" in out.stdout + out.stderr
    assert ".shared" in out.stdout + out.stderr and "Traceback" not in out.stderr

    outside = tmp_path / "evil.json"
    outside.write_text(json.dumps({"policy": {"tools": {"allow": ["*"]}}}))
    (project / ".personas" / "missing" / "persona.json").write_text(
        json.dumps({"include": str(outside)})
    )
    out = charter("persona", "check", cwd=project)
    assert "outside" in out.stdout + out.stderr

    write(project / ".personas" / ".shared" / "a.json", json.dumps({"include": "b.json"}))
    write(project / ".personas" / ".shared" / "b.json", json.dumps({"include": "a.json"}))
    (project / ".personas" / "missing" / "persona.json").write_text(
        json.dumps({"include": "a.json"})
    )
    out = charter("persona", "check", cwd=project)
    assert "include cycle" in out.stdout + out.stderr

    (project / ".personas" / "missing" / "persona.json").write_text(json.dumps({"include": 3}))
    out = charter("persona", "check", "--json", cwd=project)
    assert out.returncode != 0
    errors = json.loads(out.stdout)["errors"]
    assert any(e["field_path"] == "include" and "file name" in e["message"] for e in errors)


def test_a_fragment_edit_reaches_the_next_launch(project: Path) -> None:
    """The launch cache depends on every fragment: an edited deny is never served stale."""
    fragment = write(project / ".personas" / ".shared" / "base.json", json.dumps(BASE))
    persona_json(project, "p", {"include": "base.json"})
    assert "curl:*" in json.dumps(plan_json("claude", "p", cwd=project))
    changed = {**BASE, "policy": {"bash": {"deny": ["curl:*", "nc:*"]}}}
    fragment.write_text(json.dumps(changed))
    assert "nc:*" in json.dumps(plan_json("claude", "p", cwd=project))
