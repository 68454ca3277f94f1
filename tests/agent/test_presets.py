"""Role presets: the seed's defaults, caller overrides, and the captain defaults enforced."""

from __future__ import annotations

from typing import Any

import pytest

from charter.agent import AgentOptionError, MockProvider
from charter.agent.presets import (
    PRESETS,
    agent_budget,
    agent_preset,
    audit_agent,
    merge_captain_agent,
    oncall_captain_agent,
    release_captain_agent,
    summary_agent,
    verify_agent,
)

from .conftest import Recorder, tc


def test_seed_defaults_table() -> None:
    table = {
        "audit": ("verifier", True, 1, (4, 12, 2)),
        "repair": ("tool_using", True, 2, (4, 16, 2)),
        "verify": ("verifier", False, 0, (1, 5, 1)),
        "merge_captain": ("tool_using", True, 3, (8, 60, 4)),
        "review_captain": ("tool_using", True, 3, (6, 30, 3)),
        "oncall_captain": ("tool_using", True, 3, (6, 24, 3)),
        "release_captain": ("tool_using", True, 3, (8, 40, 4)),
    }
    for kind, (profile, until_done, nudges, (initial, top, by)) in table.items():
        p = PRESETS[kind]
        assert (p["profile"], p["loop_until_done"], p["max_nudges"]) == (
            profile,
            until_done,
            nudges,
        )
        assert p["iteration_budget"] == {
            "mode": "adaptive",
            "initial": initial,
            "max": top,
            "extend_by": by,
        }
    assert PRESETS["summary"]["tool_choice"] == "none"
    assert PRESETS["summary"]["iteration_budget"] == {"mode": "fixed", "initial": 1, "max": 1}
    assert PRESETS["verify"]["done_judge"] is True


def test_caller_wins_and_adaptive_sugar() -> None:
    opts = agent_preset("repair", {"max_nudges": 5, "iteration_budget": "adaptive"})
    assert opts["max_nudges"] == 5
    assert opts["iteration_budget"] == {"mode": "adaptive", "initial": 4, "max": 16, "extend_by": 2}
    assert agent_budget("repair", {"max": 24})["max"] == 24
    assert agent_budget("adaptive", {"initial": 2, "max": 6})["initial"] == 2
    with pytest.raises(AgentOptionError):
        agent_preset("janitor")


def test_helpers_run_the_loop(rec: Recorder) -> None:
    audit = audit_agent(
        "Audit the release",
        provider=MockProvider([tc("look"), "all good"]),
        tools=[rec.tool("look")],
        require_successful_tools=["look"],
    )
    assert audit.status == "done" and audit.to_dict()["adaptive_budget"]["max"] == 12
    provider = MockProvider(["summary text"])
    summary = summary_agent("Summarize.", provider=provider)
    assert summary.llm.iterations == 1 and provider.requests[0].tool_choice == "none"
    verify = verify_agent(
        "Verify.", provider=MockProvider(["verified"], judge_turns=['{"verdict": "done"}'])
    )
    assert verify.status == "done"


def test_merge_captain_denies_writes_by_default(rec: Recorder) -> None:
    tools = [rec.tool("merge_pr", level="network"), rec.tool("list_prs")]
    result = merge_captain_agent(
        "Sweep open PRs.",
        provider=MockProvider([tc("merge_pr"), tc("list_prs"), "swept"]),
        tools=tools,
    )
    assert rec.names() == ["list_prs"]  # the write never ran; the read did
    deny = [e for e in result.trace["events"] if e["type"] == "PermissionDeny"]
    assert deny[0]["policyDecision"]["rule"] == "default" and deny[0]["tool"] == "merge_pr"
    # a consent callable is the HITL bridge: it approves this merge
    rec.calls.clear()
    asked: list[str] = []
    merge_captain_agent(
        "Sweep.",
        provider=MockProvider([tc("merge_pr"), "swept"]),
        tools=tools,
        consent=lambda request: asked.append(request.tool) or True,
    )
    assert rec.names() == ["merge_pr"] and asked == ["merge_pr"]


def test_oncall_captain_rate_limits_model_calls(rec: Recorder) -> None:
    provider = MockProvider([tc("page"), tc("page"), tc("page"), "triaged"])
    result = oncall_captain_agent(
        "Triage alerts.",
        provider=provider,
        tools=[rec.tool("page")],
        rate_limit={"max_calls": 2, "message": "alert-loop cap"},
    )
    assert rec.names() == ["page", "page"] and len(provider.requests) == 2
    assert result.status == "provider_error" and "alert-loop cap" in result.error["message"]


def test_captain_llm_layers_dry_run_escalation_logging(rec: Recorder) -> None:
    sent = MockProvider(["should not be called"])
    shadow: list[dict[str, Any]] = []
    result = release_captain_agent(
        "Cut v0.9.0.", provider=sent, dry_run={"sink": shadow}, tools=[rec.tool("tag")]
    )
    assert sent.requests == [] and len(shadow) == 1 and result.status == "done"
    cheap, frontier = MockProvider([tc("tag"), "cheap done"]), MockProvider(['{"verdict": "done"}'])
    log: list[dict[str, Any]] = []
    audit: list[dict[str, Any]] = []
    release_captain_agent(
        "Cut v0.9.1.",
        provider=cheap,
        tools=[rec.tool("tag")],
        cheap_caller=cheap,
        frontier_caller=frontier,
        escalate_predicate=lambda call: call["request"].purpose == "judge",
        logging_sink=log.append,
        audit_sink=audit.append,
    )
    assert [r["tier"] for r in log] == ["cheap", "cheap"] and frontier.requests == []
    assert [{k: r[k] for k in ("tool", "arguments", "status", "result")} for r in audit] == [
        {"tool": "tag", "arguments": {}, "status": "ok", "result": "ok"}
    ]


def test_audit_sink_sees_denied_and_refused_calls(rec: Recorder) -> None:
    audit: list[dict[str, Any]] = []
    provider = MockProvider([tc("rm", path="x"), tc("push"), tc("tag"), "done"])
    result = release_captain_agent(
        "Cut v1.",
        provider=provider,
        tools=[rec.tool("rm"), rec.tool("push"), rec.tool("tag")],
        policy={"tools": {"deny": ["rm"]}},
        approval_policy={
            "rules": [{"name": "no-push", "decision": "deny", "match": {"tools": ["push"]}}]
        },
        audit_sink=audit.append,
    )
    assert result.status == "done" and rec.names() == ["tag"]  # the effect: only tag ran
    assert [(r["tool"], r["status"]) for r in audit] == [
        ("rm", "permission_denied"),
        ("push", "permission_denied"),
        ("tag", "ok"),
    ]
    assert audit[1]["decision"]["rule"] == "no-push"  # the refusing rule, not "allowed"
    assert "allowed by all" not in audit[1]["decision"]["reason"]


@pytest.mark.parametrize("key", ["telemetry", "handoff_sink"])
def test_captain_layers_not_built_fail_loudly(key: str) -> Any:
    with pytest.raises(AgentOptionError) as err:
        merge_captain_agent("x", provider=MockProvider(["ok"]), **{key: True})
    assert err.value.option == key
    with pytest.raises(AgentOptionError, match="cheap_caller"):
        merge_captain_agent("x", provider=MockProvider(["ok"]), cheap_caller=MockProvider([]))
