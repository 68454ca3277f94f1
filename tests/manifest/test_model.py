"""Valid manifests: aliases, canonical values, the effective policy, stages, routes, triggers."""

from __future__ import annotations

from pathlib import Path

from charter.manifest import AutonomyTier, ReceiptPolicy, load_manifest, persona_to_dict
from charter.policy import SideEffectLevel, ToolAnnotations, ToolCall, builtin_annotations, decide

from .conftest import PERSONA, write


def test_aliases_give_canonical_values(tmp_path: Path) -> None:
    file = write(
        tmp_path / "charter.toml",
        """\
[[personas]]
name = "alpha"
description = "d"
entry = "pkg.flows:run"
capabilities = ["git.get_diff"]
tier = "Act-With-Approval"
receipts = "optional"
eval_packs = ["smoke"]
""",
    )
    write(tmp_path / "evals" / "smoke.toml", 'name = "smoke"\n')  # an eval pack needs its file
    manifest = load_manifest(file, include_global=False)
    assert manifest.ok, manifest.errors
    [p] = manifest.personas
    assert p.entry_workflow.module == "pkg.flows" and p.entry_workflow.function == "run"
    assert p.autonomy_tier is AutonomyTier.ACT_WITH_APPROVAL
    assert p.receipt_policy is ReceiptPolicy.OPTIONAL
    assert p.evals == ("smoke",)
    data = persona_to_dict(p)
    assert data["autonomy_tier"] == "act_with_approval"
    assert data["receipt_policy"] == "optional"
    assert data["tools"] is None and data["capabilities"] == ["git.get_diff"]


def test_autonomy_alias(tmp_path: Path) -> None:
    text = PERSONA.format(name="alpha").replace("autonomy_tier", "autonomy")
    manifest = load_manifest(write(tmp_path / "charter.toml", text), include_global=False)
    assert manifest.personas[0].autonomy_tier is AutonomyTier.SUGGEST


def test_full_persona_and_effective_policy(tmp_path: Path) -> None:
    write(tmp_path / "flows" / "alpha.py", "def run(ctx): ...\n")
    file = write(
        tmp_path / "charter.toml",
        """\
[[personas]]
name = "alpha"
version = "1.2.0"
description = "d"
entry_workflow = "flows/alpha.py:run"
tools = ["Read", "grep", "bash", "github__*"]
capabilities = ["git.get_diff", "process.*"]
autonomy_tier = "act_auto"
receipt_policy = "required"
triggers = ["github.pr_opened"]
schedules = ["@daily", "*/5 * * * *"]
handoffs = ["persona://alpha", "human:maintainers", "worker://alpha", "a2a://x.example.com:8443/t"]
budget = { daily_usd = 2, max_tokens = 10 }

[personas.policy]
tools = { deny = ["bash"] }
paths = { write = { allow = [] } }
side_effect_level = "process_exec"

[[personas.stages]]
name = "look"
allowed_tools = ["read", "github__get_pr"]
side_effect_level = "read_only"
on_exit = { on_complete = "act" }

[[personas.stages]]
name = "act"
max_iterations = 3
""",
    )
    manifest = load_manifest(file, include_global=False)
    assert manifest.ok, manifest.errors
    p = manifest.personas[0]
    assert p.tools == ("read", "grep", "bash", "github__*")
    assert p.budget.daily_usd == 2.0 and isinstance(p.budget.daily_usd, float)
    assert [t.kind for t in p.handoffs] == ["persona", "human", "worker", "a2a"]
    policy = p.effective_policy
    assert policy.side_effect_level is SideEffectLevel.PROCESS_EXEC

    def call(name: str, **args: str) -> ToolCall:
        return ToolCall(name, args, builtin_annotations(name) or ToolAnnotations())

    assert decide(call("read", file_path=str(tmp_path / "x")), [p.frame()]).allowed
    assert not decide(call("bash", command="ls"), [p.frame()]).allowed
    assert not decide(call("webfetch"), [p.frame()]).allowed
    look = p.stage_frame("look")
    assert look.kind == "stage" and look.stage == "look"
    assert look.policy.side_effect_level is SideEffectLevel.READ_ONLY
    assert p.stage("act") is not None and p.stage("act").allowed_tools is None  # type: ignore[union-attr]
    data = persona_to_dict(p, manifest)
    assert data["stages"][0]["on_exit"] == {"on_complete": "act", "on_failure": None}
    assert data["effective_policy"]["tools"]["deny"] == ["bash"]
    assert data["trigger_bindings"] == [
        {
            "provider": "github",
            "event": "pr_opened",
            "handler": "persona://alpha",
            "handler_kind": "persona",
            "source": "persona",
        }
    ]


def test_standalone_persona_file(tmp_path: Path) -> None:
    text = PERSONA.format(name="solo").replace("[[personas]]\n", "")
    file = write(tmp_path / "solo.toml", text)
    manifest = load_manifest(file, include_global=False)
    assert manifest.ok and manifest.names == ("solo",)
    assert manifest.personas[0].sources[0].kind == "persona_file"
    bad = write(tmp_path / "bad.toml", text + "budget = { daily_usd = -1 }\nmood = 1\n")
    errors = load_manifest(bad, include_global=False).errors
    assert [e.field_path for e in errors] == ["budget.daily_usd", "mood"]


def test_persona_files_glob_and_duplicates_across_files(tmp_path: Path) -> None:
    write(
        tmp_path / "personas" / "b.toml", PERSONA.format(name="beta").replace("[[personas]]\n", "")
    )
    write(
        tmp_path / "personas" / "a.toml", PERSONA.format(name="alpha").replace("[[personas]]\n", "")
    )
    file = write(
        tmp_path / "charter.toml",
        'persona_files = ["personas/*.toml"]\n' + PERSONA.format(name="alpha"),
    )
    manifest = load_manifest(file, include_global=False)
    [err] = manifest.errors
    assert err.manifest_path == str(tmp_path / "personas" / "a.toml")
    assert err.field_path == "name" and "duplicate persona name 'alpha'" in err.message
    assert manifest.names == ("alpha", "beta")


def test_persona_files_bad_patterns_are_errors(tmp_path: Path) -> None:
    file = write(
        tmp_path / "charter.toml",
        'persona_files = ["/etc/*.toml", "nothing/*.toml"]\n' + PERSONA.format(name="alpha"),
    )
    errors = {e.field_path: e.message for e in load_manifest(file, include_global=False).errors}
    assert "relative to" in errors["persona_files[0]"]
    assert "no file matches" in errors["persona_files[1]"]


def test_routes_and_triggers(tmp_path: Path) -> None:
    file = write(
        tmp_path / "charter.toml",
        PERSONA.format(name="alpha")
        + PERSONA.format(name="beta")
        + """
[[handoff_routes]]
id = "r"
kind = "k"
from = "alpha"

[[handoff_routes.route]]
target = "beta"

[[handoff_routes.route]]
target = "human:maintainers"
when = "budget_exhausted"
policy_override = { tools = ["read_note"], side_effect_level = "read_only" }

[[triggers]]
id = "t"
provider = "github"
match = { events = ["pr_opened", "pr_closed"], metadata = { repository = "a/b", number = 4 } }
handler = "beta"
""",
    )
    manifest = load_manifest(file, include_global=False)
    assert manifest.ok, manifest.errors
    [route] = manifest.routes_from("alpha")
    assert route.route[0].when == "always"
    assert route.route[1].policy_override is not None
    assert route.route[1].policy_override.side_effect_level is SideEffectLevel.READ_ONLY
    [trig] = manifest.triggers
    assert trig.metadata == {"repository": "a/b", "number": "4"}
    assert [(b.provider, b.event, b.persona) for b in manifest.trigger_bindings("beta")] == [
        ("github", "pr_opened", "beta"),
        ("github", "pr_closed", "beta"),
    ]


def test_other_top_level_sections_are_ignored(tmp_path: Path) -> None:
    file = write(tmp_path / "charter.toml", "[runtime]\nstate = 'x'\n" + PERSONA.format(name="a"))
    assert load_manifest(file, include_global=False).ok
