# ruff: noqa: E501  (the manifests keep harn's long inline tables as harn writes them)
"""harn's own persona manifests (issue 37): what charter accepts, reads and refuses.

The manifests here are written for these tests; each construct uses the fields and
values harn's ``personas/*/harn.toml`` use (burin-labs/harn: merge_captain,
review_captain, oncall_captain, ship_captain, fixer, the hybrid-classify-then-act
template). Nothing is fetched.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from charter.agent import MockProvider
from charter.agent.reasoning import EFFORTS, lower_openai
from charter.manifest import load_manifest, persona_to_dict
from charter.manifest.spec import REASONING_EFFORTS
from charter.run import RunOptions, cohort_values, open_session, run_in_session, select_arm
from charter.run.errors import ForeignWorkflow, WorkflowLoadError
from charter.run.loader import load_workflow
from charter.run.serve import match_personas, webhook_kind

from .conftest import write

MERGE_CAPTAIN = """\
[package]
name = "harn-merge-captain-persona"
version = "0.1.0"

[[personas]]
name = "merge_captain"
version = "0.1.0"
description = "Harn-native merge captain. Owns multi-repo PR queue scheduling."
entry_workflow = "manifest.harn#run"
tools = ["github", "ci"]
capabilities = [
  "git.get_branch",
  "git.get_diff",
  "process.exec",
  "interaction.ask",
  "runtime.approved_plan",
  "runtime.dry_run",
  "runtime.pipeline_input",
  "runtime.record_run",
  "runtime.task",
  "workspace.read_text",
  "workspace.list",
]
autonomy_tier = "act_with_approval"
receipt_policy = "required"
triggers = [
  "github.pr_opened",
  "github.pr_synchronized",
  "github.check_failed",
  "github.merge_group_completed",
]
schedules = ["*/10 * * * *"]
handoffs = []
context_packs = ["repo_policy", "merge_policy", "release_policy"]
evals = ["merge_captain_smoke"]
owner = "platform"
budget = { daily_usd = 12.0, frontier_escalations = 2, max_tokens = 80000, max_runtime_seconds = 900 }
model_policy = { default_model = "gpt-5.4-mini", escalation_model = "gpt-5.4", fallback_models = ["gpt-5.2"], effort = "medium" }
rollout_policy = { mode = "approval_only", percentage = 100, cohorts = ["merge-captain-v1"] }
package_source = { package = "harn-merge-captain-persona", path = "personas/merge_captain" }
"""

ONCALL_CAPTAIN = """\
[package]
name = "harn-oncall-captain-persona"
version = "0.1.0"

[[personas]]
name = "oncall_captain"
version = "0.1.0"
description = "Harn-native on-call captain."
entry_workflow = "manifest.harn#run"
tools = ["pagerduty", "slack", "mcp"]
capabilities = [
  "interaction.ask",
  "project.lessons",
  "runtime.approved_plan",
  "runtime.dry_run",
  "runtime.pipeline_input",
  "runtime.record_run",
]
autonomy_tier = "act_with_approval"
receipt_policy = "required"
triggers = ["pagerduty.incident_triggered", "slack.oncall_message"]
schedules = ["*/15 * * * *"]
handoffs = []
context_packs = ["oncall_runbook", "service_ownership", "release_policy"]
evals = ["oncall_captain_smoke"]
owner = "sre"
budget = { daily_usd = 8.0, frontier_escalations = 1, max_tokens = 50000, max_runtime_seconds = 900 }
model_policy = { default_model = "gpt-5.4-mini", escalation_model = "gpt-5.4", fallback_models = ["gpt-5.2"], reasoning_effort = "high" }
rollout_policy = { mode = "approval_only", percentage = 100, cohorts = ["oncall-captain-v1"] }
package_source = { package = "harn-oncall-captain-persona", path = "personas/oncall_captain" }
"""

REVIEW_CAPTAIN = """\
[package]
name = "harn-review-captain-persona"
version = "0.1.0"

[[personas]]
name = "review_captain"
version = "0.1.0"
description = "Harn-native review captain."
entry_workflow = "manifest.harn#run"
tools = ["github", "mcp"]
capabilities = ["git.get_diff", "project.scan", "runtime.dry_run", "runtime.pipeline_input", "runtime.record_run"]
autonomy_tier = "suggest"
receipt_policy = "required"
triggers = ["github.review_requested", "github.pull_request_synchronized"]
schedules = ["0 */2 * * *"]
evals = ["review_captain_smoke"]
model_policy = { default_model = "gpt-5.4-mini", reasoning_effort = "medium" }
rollout_policy = { mode = "approval_only", percentage = 100, cohorts = ["review-captain-v1"] }
"""

SHIP_CAPTAIN = """\
[package]
name = "harn-ship-captain-persona"
version = "0.1.0"

[[personas]]
name = "ship_captain"
version = "0.1.0"
description = "Watches Flow atoms and emits approval-gated Phase 0 mock PR receipts."
entry_workflow = "manifest.harn#run"
tools = ["github", "mcp"]
capabilities = [
  "git.get_diff",
  "project.scan",
  "project.scope_test_command",
  "project.test_commands",
  "runtime.approved_plan",
  "runtime.dry_run",
  "runtime.record_run",
]
autonomy_tier = "act_with_approval"
receipt_policy = "required"
triggers = ["flow.atom_stream_updated", "flow.slice_candidate_requested"]
schedules = ["*/15 * * * *"]
evals = ["slice_quality", "false_ship_rate"]
model_policy = { default_model = "gpt-5.4-mini", reasoning_effort = "medium" }
rollout_policy = { mode = "approval_only", percentage = 100, cohorts = ["flow-phase-0"] }
"""

FIXER = """\
[package]
name = "harn-fixer-persona"
version = "0.1.0"

[[personas]]
name = "fixer"
description = "Consumes inert Flow remediation suggestions."
entry_workflow = "manifest.harn#run"
tools = ["github", "mcp"]
capabilities = ["git.get_diff", "project.scan", "runtime.approved_plan", "runtime.dry_run", "runtime.record_run"]
autonomy_tier = "act_with_approval"
receipt_policy = "required"
triggers = ["invariant.blocked_with_remediation"]
schedules = []
evals = []
model_policy = { default_model = "gpt-5.4-mini", reasoning_effort = "medium" }
rollout_policy = { mode = "approval_only", percentage = 100, cohorts = ["flow-v0"] }
"""

TEMPLATE = """\
[package]
name = "harn-persona-template-hybrid-classify-then-act"
version = "0.1.0"
description = "Template package for cheap classify, escalation, then action personas."

[[personas]]
name = "template_persona"
version = "0.1.0"
description = "Hybrid classify-then-act template persona."
entry_workflow = "src/template_persona.harn#run"
tools = ["github", "mcp"]
capabilities = ["project.scan", "runtime.record_run"]
autonomy_tier = "act_with_approval"
receipt_policy = "required"
triggers = ["github.issue_opened"]
budget = { daily_usd = 3.0, run_usd = 0.10, frontier_escalations = 1, max_tokens = 16000, max_runtime_seconds = 180 }
model_policy = { default_model = "mock", escalation_model = "mock", fallback_models = ["mock"], reasoning_effort = "medium" }
"""

#: each harn-shaped manifest and the warnings `persona check` must give it (and no others)
HARN_MANIFESTS: dict[str, tuple[str, dict[str, int]]] = {
    "merge_captain": (
        MERGE_CAPTAIN,
        {"foreign_table": 1, "foreign_entry": 1, "trigger_not_received": 2, "foreign_evals": 1},
    ),
    "oncall_captain": (
        ONCALL_CAPTAIN,
        {"foreign_table": 1, "foreign_entry": 1, "trigger_not_received": 2, "foreign_evals": 1},
    ),
    "review_captain": (
        REVIEW_CAPTAIN,
        {"foreign_table": 1, "foreign_entry": 1, "trigger_not_received": 1, "foreign_evals": 1},
    ),
    "ship_captain": (
        SHIP_CAPTAIN,
        {"foreign_table": 1, "foreign_entry": 1, "trigger_not_received": 2, "foreign_evals": 1},
    ),
    "fixer": (FIXER, {"foreign_table": 1, "foreign_entry": 1, "trigger_not_received": 1}),
    "template_persona": (TEMPLATE, {"foreign_table": 1, "foreign_entry": 1}),
}


def charter(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The real entry point, in its own process."""
    return subprocess.run(
        [sys.executable, "-m", "charter", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def harn_file(tmp_path: Path, name: str) -> Path:
    return write(tmp_path / name / "harn.toml", HARN_MANIFESTS[name][0])


@pytest.mark.parametrize("name", list(HARN_MANIFESTS))
def test_harn_manifest_checks_clean_with_documented_warnings(tmp_path: Path, name: str) -> None:
    file = harn_file(tmp_path, name)
    proc = charter("persona", "--manifest", str(file), "check", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    assert data["ok"] is True and data["personas"] == [name]
    assert data["warning_counts"] == HARN_MANIFESTS[name][1]
    assert len(data["warnings"]) == sum(HARN_MANIFESTS[name][1].values())
    # text mode: the same warnings on stderr, exit 0
    text = charter("persona", "--manifest", str(file), "check")
    assert text.returncode == 0 and f"ok: 1 persona in {file}: {name}" in text.stdout
    assert "is for another host (harn); `persona run` cannot execute it" in text.stderr


def test_a_directory_holding_harn_toml_is_a_manifest(tmp_path: Path) -> None:
    harn_file(tmp_path, "merge_captain")
    manifest = load_manifest(tmp_path / "merge_captain", include_global=False)
    assert manifest.ok, manifest.errors
    assert manifest.names == ("merge_captain",)


# -- 1. model_policy.effort / reasoning_effort --------------------------------------------


def test_manifest_efforts_are_the_agent_loops() -> None:
    assert REASONING_EFFORTS == EFFORTS


@pytest.mark.parametrize("key", ["effort", "reasoning_effort"])
def test_both_spellings_of_effort_are_read(tmp_path: Path, key: str) -> None:
    text = MERGE_CAPTAIN.replace('effort = "medium"', f'{key} = "High"')
    manifest = load_manifest(write(tmp_path / "harn.toml", text), include_global=False)
    assert manifest.ok, manifest.errors
    policy = manifest.personas[0].model_policy
    assert policy.reasoning_effort == "high"
    assert policy.agent_options() == {"reasoning_policy": "high"}
    shown = persona_to_dict(manifest.personas[0])["model_policy"]
    assert shown["reasoning_effort"] == "high"
    assert shown["agent_options"] == {"reasoning_policy": "high"}


def test_effort_errors_name_the_field(tmp_path: Path) -> None:
    both = MERGE_CAPTAIN.replace('effort = "medium"', 'effort = "low", reasoning_effort = "high"')
    errors = load_manifest(write(tmp_path / "a.toml", both), include_global=False).errors
    assert [(e.field_path, e.message) for e in errors] == [
        (
            "personas[0].model_policy.reasoning_effort",
            "'reasoning_effort' and 'effort' both set (they are the same field, "
            "'reasoning_effort')",
        )
    ]
    bad = MERGE_CAPTAIN.replace('effort = "medium"', 'effort = "maximum"')
    [err] = load_manifest(write(tmp_path / "b.toml", bad), include_global=False).errors
    assert err.field_path == "personas[0].model_policy.effort"
    assert "expected one of none, minimal, low, medium, high, xhigh" in err.message


EFFORT_PERSONA = """\
[[personas]]
name = "classifier"
description = "Classifies pull requests."
entry_workflow = "flow.py:run"
tools = ["read"]
autonomy_tier = "suggest"
receipt_policy = "optional"
model_policy = {{ default_model = "o3-mini"{effort} }}
"""


def _run_effort(tmp_path: Path, effort: str, call_options: str = "{}") -> Any:
    """Run a charter persona whose workflow calls the agent once; the request it sent."""
    root = tmp_path / "pack"
    extra = f', reasoning_effort = "{effort}"' if effort else ""
    write(root / "charter.toml", EFFORT_PERSONA.format(effort=extra))
    write(
        root / "flow.py",
        f'def run(ctx):\n    return {{"text": ctx.agent("classify", **{call_options}).text}}\n',
    )
    provider = MockProvider(default="classified")
    session = open_session(RunOptions(manifest=root, state_dir=root / "state", llm=provider))
    try:
        result = run_in_session(session, "classifier")
    finally:
        session.close()
    assert result.ok, result.to_dict()
    [request] = provider.requests
    return request


def test_effort_reaches_the_models_request(tmp_path: Path) -> None:
    request = _run_effort(tmp_path, "high")
    assert request.options.get("reasoning_policy") == "high"
    # what OpenAI would receive: the policy's effort, fitted to the reasoning model
    lowered = lower_openai(request, "openai", "o3-mini")
    assert lowered.params.get("reasoning_effort") == "high"


def test_a_calls_own_effort_wins_over_the_personas(tmp_path: Path) -> None:
    request = _run_effort(tmp_path, "high", '{"reasoning_effort": "low"}')
    assert lower_openai(request, "openai", "o3-mini").params.get("reasoning_effort") == "low"


def test_effort_none_turns_reasoning_off_and_no_effort_keeps_auto(tmp_path: Path) -> None:
    off = _run_effort(tmp_path / "off", "none")
    assert off.options.get("reasoning_policy") == "off"
    assert lower_openai(off, "openai", "o3-mini").thinking.mode == "disabled"  # type: ignore[union-attr]
    auto = _run_effort(tmp_path / "auto", "")
    assert auto.options.get("reasoning_policy", "auto") == "auto"


# -- 2. capabilities harn's hosts offer ----------------------------------------------------


def test_harn_capabilities_show_their_tools(tmp_path: Path) -> None:
    manifest = load_manifest(harn_file(tmp_path, "merge_captain"), include_global=False)
    caps = {c["capability"]: c for c in persona_to_dict(manifest.personas[0])["capability_tools"]}
    assert caps["runtime.record_run"]["status"] == "declared, no tool here"
    assert caps["runtime.record_run"]["side_effect_level"] == "none"
    assert caps["git.get_branch"]["status"] == "declared, no tool here"
    assert caps["process.exec"]["side_effect_level"] == "process_exec"
    # merge_captain's tools are github and ci: read is behind workspace.read_text, not allowed
    assert caps["workspace.read_text"]["tools"] == ["read"]
    assert caps["workspace.read_text"]["tools_allowed"] == []
    assert caps["workspace.read_text"]["status"] == "tool here, not in this persona's tools"


def test_a_capability_tool_the_persona_allows(tmp_path: Path) -> None:
    text = MERGE_CAPTAIN.replace('tools = ["github", "ci"]', 'tools = ["github", "ci", "ls"]')
    manifest = load_manifest(write(tmp_path / "harn.toml", text), include_global=False)
    caps = {c["capability"]: c for c in persona_to_dict(manifest.personas[0])["capability_tools"]}
    assert caps["workspace.list"]["tools_allowed"] == ["ls"]
    assert caps["workspace.list"]["status"] == "tool here"


def test_other_harn_host_operations_still_need_declaring(tmp_path: Path) -> None:
    text = FIXER.replace('"runtime.record_run"]', '"runtime.record_run", "runtime.set_result"]')
    [err] = load_manifest(write(tmp_path / "a.toml", text), include_global=False).errors
    assert err.field_path == "personas[0].capabilities[5]"
    assert "unknown capability 'runtime.set_result'" in err.message
    declared = '[check]\nhost_capabilities = { runtime = ["set_result"] }\n\n' + text
    assert load_manifest(write(tmp_path / "b.toml", declared), include_global=False).ok


def test_inspect_of_harn_merge_captain(tmp_path: Path) -> None:
    file = harn_file(tmp_path, "merge_captain")
    proc = charter("persona", "--manifest", str(file), "inspect", "merge_captain")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "manifest.harn#run  (for another host: harn; persona run refuses it)" in out
    assert "reasoning:       effort medium -> agent loop reasoning_policy=medium" in out
    assert "named cohorts:   merge-captain-v1" in out
    assert "runtime.record_run [none] declared, no tool here" in out
    assert "workspace.read_text [read_only] tool here: read (not in this persona's tools)" in out
    assert "tools: allow github, ci" in out  # the effective policy


# -- 3. named cohorts ----------------------------------------------------------------------


def _arm(text: str, tmp_path: Path, metadata: dict[str, str]) -> Any:
    manifest = load_manifest(write(tmp_path / "harn.toml", text), include_global=False)
    assert manifest.ok, manifest.errors
    persona = manifest.personas[0]
    return select_arm(persona.rollout_policy, "github:acme/api:pr:1", cohort_values(None, metadata))


def test_named_cohort_holds_all_work_when_cohorts_are_names(tmp_path: Path) -> None:
    arm = _arm(MERGE_CAPTAIN, tmp_path, {})
    assert arm.arm == "rollout" and arm.cohort == "merge-captain-v1" and arm.capped
    named = _arm(MERGE_CAPTAIN, tmp_path, {"cohort": "merge-captain-v1"})
    assert named.cohort == "merge-captain-v1"
    other = _arm(MERGE_CAPTAIN, tmp_path, {"cohort": "merge-captain-v2"})
    assert other.arm == "outside" and other.cohort is None and not other.capped


def test_named_cohort_beside_filters_needs_the_metadata(tmp_path: Path) -> None:
    text = MERGE_CAPTAIN.replace(
        'cohorts = ["merge-captain-v1"]', 'cohorts = ["repository:acme/api", "merge-captain-v1"]'
    )
    assert _arm(text, tmp_path, {}).arm == "outside"
    assert _arm(text, tmp_path, {"repository": "acme/api"}).cohort == "repository:acme/api"
    assert _arm(text, tmp_path, {"cohort": "merge-captain-v1"}).cohort == "merge-captain-v1"


def test_named_cohort_needs_no_trigger_but_filters_still_do(tmp_path: Path) -> None:
    no_triggers = FIXER.replace('triggers = ["invariant.blocked_with_remediation"]', "")
    assert load_manifest(write(tmp_path / "a.toml", no_triggers), include_global=False).ok
    filtered = no_triggers.replace('cohorts = ["flow-v0"]', 'cohorts = ["label:bug"]')
    [err] = load_manifest(write(tmp_path / "b.toml", filtered), include_global=False).errors
    assert "declares no triggers" in err.message


# -- 4. an entry workflow for another host -------------------------------------------------


def test_persona_run_refuses_a_harn_workflow_with_exit_2(tmp_path: Path) -> None:
    file = harn_file(tmp_path, "merge_captain")
    state = tmp_path / "state"
    proc = charter("persona", "--manifest", str(file), "run", "merge_captain",
                   "--state-dir", str(state), "--json")  # fmt: skip
    assert proc.returncode == 2
    error = json.loads(proc.stdout)["error"]
    assert error["kind"] == "foreign_workflow"
    assert error["message"] == (
        "persona 'merge_captain': entry_workflow 'manifest.harn#run' is for another host "
        "(harn); `persona run` cannot execute it"
    )
    text = charter("persona", "--manifest", str(file), "run", "merge_captain",
                   "--state-dir", str(state))  # fmt: skip
    assert text.returncode == 2 and "is for another host (harn)" in text.stderr
    # refused before admission: no run was recorded
    status = charter("persona", "--manifest", str(file), "status", "merge_captain",
                     "--state-dir", str(state), "--json")  # fmt: skip
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["last_run"] is None


def test_the_engine_never_imports_another_hosts_file(tmp_path: Path) -> None:
    file = harn_file(tmp_path, "merge_captain")
    write(tmp_path / "merge_captain" / "manifest.harn", "import os\nos._exit(9)\n")
    manifest = load_manifest(file, include_global=False)
    with pytest.raises(WorkflowLoadError, match="another host"):
        load_workflow(manifest.personas[0], file.parent)
    session = open_session(RunOptions(manifest=file, state_dir=tmp_path / "state"))
    try:
        with pytest.raises(ForeignWorkflow):
            run_in_session(session, "merge_captain")
    finally:
        session.close()


def test_an_unknown_hosts_workflow_is_still_an_error(tmp_path: Path) -> None:
    text = FIXER.replace("manifest.harn#run", "manifest.js#run")
    [err] = load_manifest(write(tmp_path / "a.toml", text), include_global=False).errors
    assert err.field_path == "personas[0].entry_workflow"
    assert "expected a Python target" in err.message


# -- 5. [package] and other providers' triggers, checked against the real receiver ----------


def _pr(action: str) -> tuple[str, dict[str, Any]]:
    body = {"action": action, "repository": {"full_name": "acme/api"},
            "pull_request": {"number": 7}}  # fmt: skip
    return "pull_request", body


#: harn's trigger names -> (provider, X-GitHub-Event or None, the sender's own body,
#: whether charter's receiver delivers it)
RECEIVER_CASES: dict[str, tuple[str, str | None, dict[str, Any], bool]] = {
    "github.pr_opened": ("github", *_pr("opened"), True),
    # GitHub's action is synchronize: charter's kind is pr_synchronize, matched exactly
    "github.pr_synchronized": ("github", *_pr("synchronize"), False),
    "github.pull_request_synchronized": ("github", *_pr("synchronize"), False),
    "github.pr_synchronize": ("github", *_pr("synchronize"), True),
    "github.pull_request": ("github", *_pr("synchronize"), True),  # a whole family
    "github.review_requested": ("github", *_pr("review_requested"), True),
    "github.check_failed": (
        "github",
        "check_run",
        {
            "action": "completed",
            "repository": {"full_name": "acme/api"},
            "check_run": {"id": 5, "conclusion": "failure", "head_sha": "abc"},
        },
        True,
    ),
    "github.issue_opened": (
        "github",
        "issues",
        {"action": "opened", "repository": {"full_name": "acme/api"}, "issue": {"number": 3}},
        True,
    ),
    "github.merge_group_completed": (
        "github",
        "merge_group",
        {
            "action": "destroyed",
            "reason": "merged",
            "repository": {"full_name": "acme/api"},
            "merge_group": {"head_sha": "abc"},
        },
        False,
    ),
    "slack.oncall_message": (
        "slack",
        None,
        {
            "type": "event_callback",
            "team_id": "T1",
            "event_id": "Ev1",
            "event": {"type": "message", "channel": "C0ONCALL", "ts": "1.2", "text": "db down"},
        },
        False,
    ),
    "pagerduty.incident_triggered": (
        "pagerduty",
        None,
        {
            "event": {
                "id": "01",
                "event_type": "incident.triggered",
                "data": {"id": "PD1", "type": "incident"},
            }
        },
        False,
    ),
    # no native sender: the warning's generic webhook does arrive
    "flow.atom_stream_updated": ("flow", None, {"type": "atom_stream_updated", "id": "a1"}, True),
    "invariant.blocked_with_remediation": (
        "invariant",
        None,
        {"type": "blocked_with_remediation", "id": "i1"},
        True,
    ),
}


@pytest.mark.parametrize("trigger", list(RECEIVER_CASES))
def test_each_trigger_warning_matches_what_the_receiver_does(tmp_path: Path, trigger: str) -> None:
    provider, event, body, delivered = RECEIVER_CASES[trigger]
    text = FIXER.replace('triggers = ["invariant.blocked_with_remediation"]',
                         f'triggers = ["{trigger}"]')  # fmt: skip
    manifest = load_manifest(write(tmp_path / "harn.toml", text), include_global=False)
    assert manifest.ok, manifest.errors
    warned = [w for w in manifest.warnings if w.kind == "trigger_not_received"]
    names, _ = match_personas(manifest, provider, webhook_kind(provider, event, body), body)
    assert (names == ["fixer"]) is delivered
    if provider in ("github", "slack", "pagerduty"):
        if "synchronized" in trigger:  # the warning names the spelling that is delivered
            assert "the nearest it delivers is github.pr_synchronize" in warned[0].message
        # a provider's own webhook: warned exactly when the receiver does not deliver it
        assert bool(warned) is not delivered, [str(w) for w in warned]
    else:
        # no native sender: warned, and the generic webhook the warning names does arrive
        [warning] = warned
        assert f'POST /hooks/{provider} whose JSON body has "type": "{body["type"]}"' in (
            warning.message
        )


def test_package_table_is_a_warning_not_an_error(tmp_path: Path) -> None:
    manifest = load_manifest(harn_file(tmp_path, "fixer"), include_global=False)
    assert manifest.ok
    [table] = [w for w in manifest.warnings if w.kind == "foreign_table"]
    assert table.field_path == "package" and table.line == 1
    assert "charter reads nothing from it" in table.message


# -- 6. .personas/ with JSON persona files; eval packs need their files ---------------------

JSON_PERSONA = {
    "name": "triager",
    "description": "Triage issues.",
    "entry_workflow": "pkg.flows:run",
    "tools": ["read"],
    "autonomy_tier": "suggest",
    "receipt_policy": "optional",
}


def test_personas_folder_with_only_json_files_is_found(project: Path) -> None:
    write(project / ".personas" / "triager.json", json.dumps(JSON_PERSONA))
    found = load_manifest(cwd=project, include_global=False)
    assert found.ok, found.errors
    assert found.names == ("triager",)
    assert found.personas[0].sources[0].kind == "persona_file"
    explicit = load_manifest(project / ".personas", include_global=False)
    assert explicit.ok and explicit.names == ("triager",)
    proc = charter("persona", "check", str(project / ".personas"))
    assert proc.returncode == 0 and "triager" in proc.stdout, proc.stderr


def test_a_broken_json_persona_file_in_personas_is_reported(project: Path) -> None:
    write(project / ".personas" / "triager.json", json.dumps({**JSON_PERSONA, "tools": "read"}))
    [err] = load_manifest(cwd=project, include_global=False).errors
    assert err.manifest_path.endswith("triager.json") and err.field_path == "tools"


def test_a_home_json_persona_is_shadowed_by_the_projects(project: Path, tmp_path: Path) -> None:
    write(project / ".personas" / "triager.json", json.dumps(JSON_PERSONA))
    home = tmp_path / "home"
    write(home / ".personas" / "triager.json", json.dumps({**JSON_PERSONA, "description": "x"}))
    manifest = load_manifest(cwd=project, home=home)
    assert manifest.ok, manifest.errors
    assert manifest.personas[0].description == "Triage issues."


EVAL_PERSONA = """\
[[personas]]
name = "alpha"
description = "d"
entry_workflow = "pkg.flows:run"
tools = ["read"]
autonomy_tier = "suggest"
receipt_policy = "required"
evals = ["smoke", "deep"]
"""


def test_eval_names_without_eval_files_fail_check(tmp_path: Path) -> None:
    file = write(tmp_path / "charter.toml", EVAL_PERSONA)
    write(tmp_path / "evals" / "smoke.toml", 'name = "smoke"\n')
    proc = charter("persona", "check", str(file), "--json")
    assert proc.returncode == 1
    [err] = json.loads(proc.stdout)["errors"]
    assert err["field_path"] == "personas[0].evals[1]" and err["line"] == 8
    assert "eval pack 'deep' has no eval file" in err["message"]
    write(tmp_path / "evals" / "deep.toml", 'name = "deep"\n')
    assert charter("persona", "check", str(file)).returncode == 0


# -- serve: another host's persona is left out of the fleet's runs -------------------------

WATCHER = """
[[personas]]
name = "watcher"
description = "Watches pull requests."
entry_workflow = "flow.py:run"
tools = ["read"]
autonomy_tier = "suggest"
receipt_policy = "optional"
triggers = ["github.pr_opened"]
"""


def _fleet(tmp_path: Path) -> Path:
    root = tmp_path / "fleet"
    write(root / "charter.toml", MERGE_CAPTAIN + WATCHER)
    write(root / "flow.py", 'def run(ctx):\n    return {"ok": True}\n')
    return root


def test_serve_fires_no_schedule_of_another_hosts_persona(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from charter.run.serve import Supervisor

    root = _fleet(tmp_path)
    at = datetime(2026, 11, 28, 12, 10, tzinfo=UTC)  # merge_captain's */10 is due
    session = open_session(RunOptions(manifest=root, state_dir=root / "state", at=at))
    lines: list[str] = []
    try:
        supervisor = Supervisor(session, log_line=lines.append)
        assert supervisor.tick(at) == []
        assert session.runtime.status("merge_captain", now=at).to_dict()["last_run"] is None
    finally:
        session.close()
    assert lines == [
        "persona merge_captain left out: entry_workflow 'manifest.harn#run' is for another "
        "host (harn); `persona run` cannot execute it"
    ]


def test_serve_accepts_no_webhook_work_for_another_hosts_persona(tmp_path: Path) -> None:
    from charter.run.serve import Server

    root = _fleet(tmp_path)
    body = json.dumps(_pr("opened")[1]).encode()
    server = Server(RunOptions(manifest=root, state_dir=root / "state"), port=0,
                    log_line=lambda _line: None, insecure_unsigned=["github"])  # fmt: skip
    try:
        status, answer = server.accept_webhook("github", body, {"x-github-event": "pull_request"})
    finally:
        server.stop()
    assert status == 202 and answer["personas"] == ["watcher"]


def test_persona_eval_refuses_another_hosts_persona(tmp_path: Path) -> None:
    file = harn_file(tmp_path, "merge_captain")
    proc = charter("persona", "--manifest", str(file), "eval", "merge_captain", "--json")
    assert proc.returncode == 2
    error = json.loads(proc.stdout)["error"]
    assert error["kind"] == "foreign_workflow" and "another host (harn)" in error["message"]


def test_the_kind_tables_are_what_the_receiver_produces() -> None:
    """Every GitHub event/action, Linear type/action and Slack event the receiver turns
    into a kind is one ``unreceived`` calls delivered, and a persona declaring it is woken."""
    from charter.manifest.reach import (
        GITHUB_ACTIONS,
        GITHUB_EVENTS,
        LINEAR_KINDS,
        SLACK_EVENTS,
        unreceived,
    )
    from charter.manifest.syntax import TriggerName
    from charter.runtime.triggers import declares_trigger, github_kind, linear_kind, slack_kind

    produced: list[tuple[str, str | None]] = []
    for event in GITHUB_EVENTS:
        for action in (*GITHUB_ACTIONS.get(event, ()), None):
            body: dict[str, Any] = {"action": action} if action else {}
            produced.append(("github", github_kind(event, body)))
    produced.append(("github", github_kind("check_run", {"check_run": {"conclusion": "failure"}})))
    produced.append(("github", github_kind("pull_request", {"action": "closed",
                                                             "pull_request": {"merged": True}})))  # fmt: skip
    for kind in ("Issue", "Comment"):
        for action in ("create", "update", "remove"):
            produced.append(("linear", linear_kind({"type": kind, "action": action})))
    produced.extend(("linear", linear_kind({"type": t})) for t in LINEAR_KINDS if "_" not in t)
    produced.extend(("slack", slack_kind({"event": {"type": t}})) for t in SLACK_EVENTS)
    for provider, kind in produced:
        assert kind is not None
        assert unreceived(TriggerName(provider, kind)) is None, (provider, kind)
        assert declares_trigger([f"{provider}.{kind}"], provider, kind)


def test_other_files_in_personas_are_left_alone(project: Path) -> None:
    write(project / ".personas" / "triager.json", json.dumps(JSON_PERSONA))
    write(project / ".personas" / "settings.json", json.dumps({"theme": "dark"}))
    write(project / ".personas" / "tool.toml", 'color = "blue"\n')
    # a persona.json fragment an `include` may name (../base.json) is not a persona either
    write(project / ".personas" / "base.json", json.dumps({"policy": {"tools": ["read"]}}))
    manifest = load_manifest(cwd=project, include_global=False)
    assert manifest.ok, manifest.errors
    assert manifest.names == ("triager",)


def test_a_broken_home_persona_file_leaves_the_project_working(
    project: Path, tmp_path: Path
) -> None:
    write(project / ".personas" / "triager.json", json.dumps(JSON_PERSONA))
    home = tmp_path / "home"
    write(home / ".personas" / "broken.json", '{"name": "broken", "tools": [')
    write(home / ".personas" / "nameless.json", json.dumps({"description": "no name"}))
    loaded = load_manifest(cwd=project, home=home)
    assert not loaded.ok  # `persona check` still reports them
    fleet, invalid = loaded.split_invalid()
    assert fleet.ok and fleet.names == ("triager",)
    assert set(invalid) == {"broken", "nameless"}


def test_explicit_webhook_triggers_are_checked_against_the_receiver(tmp_path: Path) -> None:
    text = (
        MERGE_CAPTAIN
        + """
[[triggers]]
id = "merge-captain-sync"
kind = "webhook"
provider = "github"
match = { events = ["pr_synchronize", "pr_synchronized"] }
handler = "persona://merge_captain"
"""
    )
    manifest = load_manifest(write(tmp_path / "harn.toml", text), include_global=False)
    assert manifest.ok, manifest.errors
    warned = [w.field_path for w in manifest.warnings if w.kind == "trigger_not_received"]
    assert "triggers[0].match.events[1]" in warned  # pr_synchronized: never delivered
    assert "triggers[0].match.events[0]" not in warned  # pr_synchronize: GitHub's own
