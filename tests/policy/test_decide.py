from __future__ import annotations

from charter.policy import (
    Frame,
    Outcome,
    Policy,
    ToolAnnotations,
    ToolCall,
    builtin_annotations,
    decide,
    decide_resource,
)
from charter.policy.paths import PathContext


def frames(*dicts: dict[str, object]) -> list[Frame]:
    return [Frame(Policy.from_dict(d), f"frame{i}", "file") for i, d in enumerate(dicts)]


def test_empty_stack_allows() -> None:
    d = decide(ToolCall("anything"), [])
    assert d.allowed and d.outcome is Outcome.ALLOW and "no policy" in d.reason


def test_denial_names_frame_dimension_rule(ctx: PathContext) -> None:
    d = decide(
        ToolCall("bash", {"command": "curl x"}, builtin_annotations("bash")),
        frames({"commands": {"deny": ["curl:*"]}}, {"tools": ["bash", "read"]}),
        context=ctx,
    )
    assert d.denied
    assert d.frame_index == 0 and d.frame_label == "frame0" and d.frame_kind == "file"
    assert d.dimension == "commands" and d.rule == "commands.deny: curl:*"
    assert "curl" in d.reason and "frame0" in d.reason
    receipt = d.permission_denied()
    assert receipt["error"] == "permission_denied" and receipt["tool"] == "bash"
    assert receipt["frame"] == "frame0" and receipt["rule"] == "commands.deny: curl:*"
    assert d.to_dict()["frame"] == {"index": 0, "label": "frame0", "kind": "file"}


def test_top_frame_is_reported_first(ctx: PathContext) -> None:
    d = decide(
        ToolCall("write", {}, ToolAnnotations()),
        frames({"tools": ["read"]}, {"tools": []}),
        context=ctx,
    )
    assert d.frame_label == "frame1" and "allow list is empty" in d.reason


def test_unannotated_tool_counts_as_network(ctx: PathContext) -> None:
    d = decide(ToolCall("mystery"), frames({"side_effect_level": "process_exec"}), context=ctx)
    assert d.denied and d.dimension == "side_effect_level" and "network" in d.reason
    ok = decide(ToolCall("mystery"), frames({"side_effect_level": "network"}), context=ctx)
    assert ok.allowed


def test_capabilities_skills_members(ctx: PathContext) -> None:
    ann = ToolAnnotations(capabilities=("git.push",), side_effect_level=None)
    assert decide(ToolCall("t", {}, ann), frames({"capabilities": ["git.*"]}), context=ctx).allowed
    assert decide(
        ToolCall("t", {}, ann), frames({"capabilities": ["git.get_diff"]}), context=ctx
    ).denied
    skill = builtin_annotations("skill")
    assert decide(
        ToolCall("skill", {"name": "deploy"}, skill), frames({"skills": ["triage"]}), context=ctx
    ).denied
    assert decide(
        ToolCall("skill", {"name": "Triage"}, skill), frames({"skills": ["triage"]}), context=ctx
    ).allowed
    delegate = builtin_annotations("delegate")
    d = decide(
        ToolCall("delegate", {"member": "writer"}, delegate), frames({"members": []}), context=ctx
    )
    assert d.denied and d.dimension == "members"


def test_decide_resource() -> None:
    fs = frames({"mcp_servers": {"allow": ["git", "fs*"], "deny": ["fs-danger"]}})
    assert decide_resource("mcp_servers", "Git", fs).allowed
    assert decide_resource("mcp_servers", "fs-danger", fs).denied
    assert decide_resource("mcp_servers", "slack", fs).denied
    assert decide_resource("members", "x", []).allowed


def test_mcp_server_rules_apply_to_prefixed_names(ctx: PathContext) -> None:
    fs = frames({"mcp_servers": ["git"]})
    assert decide(ToolCall("git__log", {}, ToolAnnotations()), fs, context=ctx).allowed
    d = decide(ToolCall("slack__post", {}, ToolAnnotations()), fs, context=ctx)
    assert d.denied and d.dimension == "mcp_servers"


def test_visibility_ignores_arguments_but_not_names_or_levels() -> None:
    from charter.policy import decide_visibility

    fs = frames(
        {"tools": ["bash", "read"], "side_effect_level": "read_only", "commands": {"deny": ["*"]}}
    )
    bash = ToolCall("bash", {}, builtin_annotations("bash"))
    read = ToolCall("read", {}, builtin_annotations("read"))
    assert decide_visibility(read, fs).allowed
    d = decide_visibility(bash, fs)
    assert d.denied and d.dimension == "side_effect_level"
    assert decide_visibility(ToolCall("grep", {}, builtin_annotations("grep")), fs).denied
    assert decide_visibility(bash, []).allowed
