"""The CLI through the real entry point: JSON shapes, exit codes, --manifest placement."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from charter.cli import cli

from .conftest import EXAMPLES, FIXTURES, PERSONA, REPO, write


def run(*args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    old = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    finally:
        os.chdir(old)
    return result.exit_code, result.stdout, result.stderr


def test_check_examples_passes() -> None:
    code, out, _ = run("persona", "check", str(EXAMPLES), "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["ok"] is True
    assert data["manifest_path"].endswith("examples/personas/charter.toml")
    assert data["personas"] == ["merge_captain", "review_captain", "oncall_captain"]


def test_check_failure_json_shape() -> None:
    path = FIXTURES / "invalid" / "negative_budget.toml"
    code, out, _ = run("persona", "check", str(path), "--json")
    assert code == 1
    data = json.loads(out)
    assert data["ok"] is False
    [err] = data["errors"]
    assert set(err) == {"manifest_path", "field_path", "message", "line", "column"}
    assert err["field_path"] == "personas[0].budget.daily_usd"


def test_check_failure_text_names_file_field_and_expectation() -> None:
    path = FIXTURES / "invalid" / "negative_budget.toml"
    code, _, err = run("persona", "check", str(path))
    assert code == 1 and "Traceback" not in err
    assert f"{path}:" in err and "personas[0].budget.daily_usd" in err and "negative" in err


@pytest.mark.parametrize("before", [True, False])
def test_manifest_before_or_after_subcommand(before: bool) -> None:
    args = ["inspect", "merge_captain", "--json"]
    full = (
        ["persona", "--manifest", str(EXAMPLES), *args]
        if before
        else ["persona", *args, "--manifest", str(EXAMPLES)]
    )
    code, out, _ = run(*full)
    assert code == 0
    data = json.loads(out)
    for key in (
        "name",
        "version",
        "tools",
        "capabilities",
        "autonomy_tier",
        "model_policy",
        "budget",
        "triggers",
        "schedules",
        "handoffs",
        "context_packs",
        "evals",
        "receipt_policy",
        "stages",
        "effective_policy",
        "manifest_source",
        "sources",
    ):
        assert key in data, key
    assert data["autonomy_tier"] == "act_with_approval"
    assert [s["kind"] for s in data["sources"]] == ["manifest", "folder"]


def test_inspect_shows_canonical_names_for_aliases() -> None:
    _, out, _ = run("persona", "--manifest", str(EXAMPLES), "inspect", "review_captain", "--json")
    data = json.loads(out)
    assert data["autonomy_tier"] == "suggest" and data["receipt_policy"] == "required"
    assert data["evals"] == ["reviewer_quality"]
    assert data["instructions"]["claude_md"].endswith("CLAUDE.md")
    assert data["handoff_routes"][0]["id"] == "review-findings"


def test_inspect_text() -> None:
    code, out, _ = run("persona", "--manifest", str(EXAMPLES), "inspect", "oncall_captain")
    assert code == 0
    assert "effective policy:" in out and "sources (first owns the contract):" in out


def test_unknown_persona_lists_known_names() -> None:
    # an unknown persona is exit 2 everywhere, one JSON error object under --json (issue 31)
    code, _, err = run("persona", "--manifest", str(EXAMPLES), "inspect", "nobody")
    assert code == 2
    assert "unknown persona 'nobody'" in err and "merge_captain, review_captain" in err
    code, out, _ = run("persona", "--manifest", str(EXAMPLES), "inspect", "nobody", "--json")
    assert code == 2 and json.loads(out)["error"]["kind"] == "unknown_persona"


def test_list_json_and_text() -> None:
    code, out, _ = run("persona", "list", "--manifest", str(EXAMPLES), "--json")
    assert code == 0
    data = json.loads(out)
    assert [p["name"] for p in data["personas"]] == [
        "merge_captain",
        "review_captain",
        "oncall_captain",
    ]
    code, out, _ = run("persona", "list", "--manifest", str(EXAMPLES))
    assert out.splitlines()[0].split() == ["NAME", "AUTONOMY", "RECEIPTS", "SOURCE"]


def test_list_reports_an_invalid_persona_without_failing(tmp_path: Path) -> None:
    write(tmp_path / "charter.toml", PERSONA.format(name="a") + "budget = { daily_usd = -1 }\n")
    code, out, _ = run("persona", "list", "--manifest", str(tmp_path), "--json")
    data = json.loads(out)
    assert code == 0 and data["ok"] is False and data["personas"] == []
    assert [e["field_path"] for e in data["invalid_personas"]["a"]] == [
        "personas[0].budget.daily_usd"
    ]
    assert run("persona", "check", "--manifest", str(tmp_path))[0] == 1


def test_check_discovers_from_cwd(project: Path) -> None:
    write(project / "charter.toml", PERSONA.format(name="alpha"))
    code, out, _ = run("persona", "check", cwd=project)
    assert code == 0 and "alpha" in out


def test_check_without_manifest_fails(project: Path) -> None:
    code, _, err = run("persona", "check", cwd=project)
    assert code == 1 and "no charter.toml found" in err


def test_schema_is_json_schema() -> None:
    _, out, _ = run("persona", "schema")
    schema = json.loads(out)
    assert schema["$schema"].endswith("2020-12/schema")
    persona = schema["$defs"]["persona"]
    assert persona["additionalProperties"] is False
    assert (
        "autonomy" in persona["properties"]
        and "daily_usd" in schema["$defs"]["budget"]["properties"]
    )
    _, out, _ = run("persona", "schema", "--kind", "persona")
    assert "entry_workflow" in json.loads(out)["properties"]


def test_init_scaffolds_idempotently(tmp_path: Path) -> None:
    target = tmp_path / "proj"
    code, out, _ = run("init", str(target), "--json")
    assert code == 0
    created = json.loads(out)["created"]
    assert "charter.toml" in created and ".personas/_shared/README.md" in created
    (target / "charter.toml").write_text((target / "charter.toml").read_text() + "# mine\n")
    code, out, _ = run("init", str(target), "--json")
    data = json.loads(out)
    assert data["created"] == [] and "charter.toml" in data["kept"]
    assert (target / "charter.toml").read_text().endswith("# mine\n")
    code, out, _ = run("persona", "check", str(target), "--json")
    assert code == 0, out
    assert json.loads(out)["personas"] == ["assistant"]


def test_init_rejects_bad_persona_name(tmp_path: Path) -> None:
    code, _, err = run("init", str(tmp_path), "--persona", "Bad Name")
    assert code == 2 and "persona names use" in err


def test_help_stays_light() -> None:
    # `charter --help` must not import the manifest package (nor pydantic / rich).
    code = (
        "import sys; from charter.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "bad = [m for m in ('charter.manifest', 'pydantic', 'rich') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, cwd=REPO)


def test_console_script_end_to_end() -> None:
    exe = Path(sys.executable).parent / "charter"
    proc = subprocess.run(
        [str(exe), "persona", "check", str(EXAMPLES)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok: 3 personas")


def test_manifest_as_global_option_before_the_subcommand(tmp_path: Path) -> None:
    # `charter --manifest FILE persona ...`: run from elsewhere so discovery cannot help
    code, out, err = run("--manifest", str(EXAMPLES), "persona", "list", "--json", cwd=tmp_path)
    assert code == 0, err
    names = [p["name"] for p in json.loads(out)["personas"]]
    assert names == ["merge_captain", "review_captain", "oncall_captain"]
    # a --manifest after the sub-command still wins over the global one
    bad = FIXTURES / "invalid" / "negative_budget.toml"
    code, _, _ = run("--manifest", str(EXAMPLES), "persona", "check", "--manifest", str(bad))
    assert code == 1


def test_global_manifest_reaches_which(tmp_path: Path) -> None:
    code, out, err = run(
        "--manifest", str(EXAMPLES), "which", "oncall_captain", "--json", cwd=tmp_path
    )
    assert code == 0, err
    assert "oncall_captain" in out


def test_check_warns_about_route_rules_after_always(tmp_path: Path) -> None:
    text = (
        PERSONA.format(name="a")
        + PERSONA.format(name="b")
        + """
[[handoff_routes]]
id = "dead-tail"
from = "a"
route = [
  { target = "b", when = "always" },
  { target = "human:maintainers", when = "budget_exhausted" },
]
"""
    )
    file = write(tmp_path / "charter.toml", text)
    code, out, err = run("persona", "check", str(file), "--json")
    assert code == 0
    [warning] = json.loads(out)["warnings"]
    assert "'dead-tail'" in warning and "route[1]" in warning and "human:maintainers" in warning
    code, _, err = run("persona", "check", str(file))
    assert code == 0 and err.startswith("warning: handoff route 'dead-tail'")


def test_template_pack_has_no_unreachable_route_rules() -> None:
    code, out, _ = run("persona", "check", str(EXAMPLES), "--json")
    data = json.loads(out)
    assert code == 0 and not data["warning_counts"].get("unreachable_route_step")
    # its warnings are true: PagerDuty's own webhooks are not read by charter's receiver
    # (oncall_captain's trigger name and its [[triggers]] entry; the pack's oncall_captain
    # is woken by `charter persona trigger` and evals)
    assert data["warning_counts"] == {"trigger_not_received": 2}
    assert all("pagerduty.incident_triggered" in w for w in data["warnings"])
