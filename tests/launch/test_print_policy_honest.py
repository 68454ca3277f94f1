"""Issue 30 item 6: print-policy says what is passed; codex profiles cannot widen a policy.

A wrapped codex runs with ``--sandbox=danger-full-access`` inside charter's sandbox: the
permission mode said ``workspace-write``, and the element's reason wrapped one reason in
another. ``--profile NAME`` loads ``$CODEX_HOME/NAME.config.toml`` (codex 0.169), whose
keys the translation does not pin (MCP servers, writable roots, features); it and the
legacy ``-c profile=`` / ``-c profiles.*`` forms are filtered under a policy.
"""

from __future__ import annotations

from pathlib import Path

from .conftest import make_persona, plan_json


def test_a_wrapped_codex_says_what_it_is_passed(project: Path) -> None:
    (project / "src").mkdir()
    make_persona(project / ".personas", "p", policy={"paths": {"write": {"allow": ["./src"]}}})
    plan = plan_json("codex", "p", cwd=project)
    assert plan["sandbox"]["wrapped"] is True
    assert "--sandbox=danger-full-access" in plan["argv"]
    assert plan["permission_mode"].startswith("danger-full-access inside charter's sandbox")
    element = {e["element"]: e for e in plan["elements"]}["paths.write.allow"]
    assert element["reason"].count("alone") == 1, element["reason"]
    assert "the OS sandbox enforces it" not in element["reason"]


def test_codex_profiles_are_filtered_under_a_policy(project: Path) -> None:
    make_persona(project / ".personas", "p", policy={"tools": {"deny": ["websearch"]}})
    user = ["--profile", "wide", "-c", 'profiles.wide.sandbox_mode="danger-full-access"',
            "-p", "w2", "--config=profile=\"wide\"", "-m", "gpt-x"]  # fmt: skip
    plan = plan_json("codex", "p", "--", *user, cwd=project)
    filtered = [f["args"] for f in plan["args"]["filtered"]]
    assert ["--profile", "wide"] in filtered and ["-p", "w2"] in filtered
    assert ["-c", 'profiles.wide.sandbox_mode="danger-full-access"'] in filtered
    assert ['--config=profile="wide"'] in filtered
    argv = " ".join(plan["argv"])
    assert "profile" not in argv and "-m gpt-x" in argv
