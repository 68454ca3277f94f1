"""Skills lifecycle: BM25 matching, activation, the skill frame on the policy stack."""

from __future__ import annotations

from typing import Any

import pytest

from charter.agent import AgentOptionError, MockProvider, Skill, agent_loop
from charter.agent.skills import SkillMatch, SkillRegistry, match_skills, skill_define
from charter.policy import AgentScope, current_stack

from .conftest import Recorder, tc

SHIP = Skill(
    "ship",
    "Ship a production release",
    "Follow the deploy runbook. One command at a time.",
    when_to_use="User says ship, release or deploy",
    paths=("infra/**", "Dockerfile"),
    allowed_tools=("deploy_service",),
)
REVIEW = Skill(
    "review",
    "Review Python code for style and bugs",
    "Be picky.",
    when_to_use="User asks for a code review of a pull request",
)
TESTS = Skill("testing", "Write unit tests with pytest", "Cover the edges.")


def _events(result: Any, kind: str) -> list[dict[str, Any]]:
    return [e for e in result.trace["events"] if e["type"] == kind]


def _tool_names(request: Any) -> list[str]:
    return [t["name"] for t in request.tools]


def test_bm25_ranks_by_description_and_when_to_use() -> None:
    reg = SkillRegistry([SHIP, REVIEW, TESTS])
    assert [c["name"] for c in match_skills(reg, "please deploy the new release")] == ["ship"]
    top2 = match_skills(reg, "review this pull request", config=SkillMatch(top_n=2))
    assert [c["name"] for c in top2] == ["review"]  # nothing else scores above zero
    assert match_skills(reg, "what's the weather") == []
    # a working file under the skill's paths matches with no word in common
    hit = match_skills(reg, "look at this", working_files=["infra/terraform/cluster.tf"])
    assert hit[0]["name"] == "ship" and "paths:infra/terraform/cluster.tf" in hit[0]["reason"]
    # a name mention is a strong boost
    assert match_skills(reg, "use testing now")[0]["reason"].endswith("name_mention")


def test_matched_skill_narrows_tools_through_the_policy_stack(rec: Recorder) -> None:
    provider = MockProvider([tc("drop_database"), tc("deploy_service"), "shipped"])
    result = agent_loop(
        "Ship the new release to production",
        "You are a deploy engineer.",
        provider=provider,
        tools=[rec.tool("deploy_service"), rec.tool("drop_database")],
        skills=[SHIP, REVIEW],
    )
    # hostile: the tool outside allowed_tools never ran, the receipt names the skill frame
    assert rec.names() == ["deploy_service"]
    denied = [e for e in _events(result, "tool_call_audit") if e["tool_name"] == "drop_database"]
    assert denied[0]["status"] == "permission_denied"
    assert denied[0]["decision"]["frame"]["label"] == "skill:ship"
    # the model was never offered it, and the skill prompt was woven in
    first = provider.requests[0]
    assert "drop_database" not in _tool_names(first)
    assert {"deploy_service", "skill"} <= set(_tool_names(first))
    assert '<skill name="ship">' in (first.system or "")
    matched = _events(result, "skill_matched")[0]
    assert matched["candidates"][0]["name"] == "ship"
    assert _events(result, "skill_activated")[0]["skill"] == "ship"
    assert _events(result, "skill_scope_tools")[0]["allowed_tools"] == ["deploy_service"]
    assert result.to_dict()["active_skills"] == ["ship"]
    assert current_stack() == ()


def test_without_a_match_nothing_narrows(rec: Recorder) -> None:
    # the allowed twin: same tools, a task no skill matches
    provider = MockProvider([tc("drop_database"), "ok"])
    result = agent_loop(
        "what's the weather",
        provider=provider,
        tools=[rec.tool("deploy_service"), rec.tool("drop_database")],
        skills=[SHIP],
    )
    assert rec.names() == ["drop_database"]
    assert _events(result, "skill_matched")[0]["candidates"] == []
    assert not _events(result, "skill_activated")


def test_skill_frame_cannot_widen_the_stack(rec: Recorder) -> None:
    provider = MockProvider([tc("deploy_service"), "done"])
    result = agent_loop(
        "ship the release",
        provider=provider,
        tools=[rec.tool("deploy_service")],
        skills=[SHIP],
        policy={"tools": {"deny": ["deploy_service"]}},
    )
    assert rec.names() == []
    assert result.tools.rejected == ["deploy_service"]


def test_scope_forbids_matched_skill() -> None:
    result = agent_loop(
        "ship the release",
        provider=MockProvider(["ok"]),
        skills=[SHIP, REVIEW],
        scope=AgentScope(skills=("review",)),
    )
    assert not _events(result, "skill_activated")
    assert _events(result, "skill_denied")[0]["skill"] == "ship"


def test_non_sticky_reassesses_and_deactivates(rec: Recorder) -> None:
    calls: list[str] = []
    ship = skill_define(
        "ship",
        description="Ship a production release",
        allowed_tools=["deploy_service"],
        on_activate=lambda s: calls.append(f"on:{s.name}"),
        on_deactivate=lambda s: calls.append(f"off:{s.name}"),
    )
    review = Skill("review", "Review Python code for bugs")

    def steer(info: dict[str, Any]) -> str | None:
        return "now review the python code for bugs" if info["iteration"] == 1 else None

    provider = MockProvider([tc("deploy_service"), tc("drop_database"), "done"])
    result = agent_loop(
        "ship a production release",
        provider=provider,
        tools=[rec.tool("deploy_service"), rec.tool("drop_database")],
        skills=[ship, review],
        skill_match={"sticky": False},
        post_turn_callback=steer,
        loop_until_done=True,
        max_iterations=3,
    )
    assert calls == ["on:ship", "off:ship"]
    assert _events(result, "skill_deactivated")[0]["skill"] == "ship"
    assert [e["skill"] for e in _events(result, "skill_activated")] == ["ship", "review"]
    assert len(_events(result, "skill_matched")) == 3
    # after deactivation the skill frame is gone: the tool it hid runs again
    assert "drop_database" not in _tool_names(provider.requests[0])
    assert "drop_database" in _tool_names(provider.requests[1])
    assert rec.names() == ["deploy_service", "drop_database"]


def test_model_invoked_skill_applies_its_frame_next_turn(rec: Recorder) -> None:
    provider = MockProvider([tc("skill", name="ship"), tc("drop_database"), "done"])
    result = agent_loop(
        "hello",
        provider=provider,
        tools=[rec.tool("deploy_service"), rec.tool("drop_database")],
        skills=[SHIP],
        loop_until_done=True,
    )
    assert rec.names() == []
    assert "drop_database" in _tool_names(provider.requests[0])
    assert "drop_database" not in _tool_names(provider.requests[1])
    assert _events(result, "skill_activated")[0]["reason"] == "model_invoked"


def test_session_rehydrates_active_skills() -> None:
    sid = "skills-session-test"
    agent_loop("ship the release", provider=MockProvider(["a"]), skills=[SHIP], session_id=sid)
    provider = MockProvider(["b"])
    result = agent_loop("and now?", provider=provider, skills=[SHIP], session_id=sid)
    assert _events(result, "skill_activated")[0]["reason"] == "session_resume"
    assert '<skill name="ship">' in str(provider.requests[0].system)


def test_disable_model_invocation_skips_matching() -> None:
    hidden = Skill("ship", "Ship a production release", disable_model_invocation=True)
    assert match_skills(SkillRegistry([hidden]), "ship a release") == []


def test_host_strategy_and_fallback() -> None:
    reg = SkillRegistry([SHIP, REVIEW])
    cfg = SkillMatch.parse(
        {"strategy": "host", "host": lambda q, skills, files: [{"name": "review", "score": 0.9}]}
    )
    assert match_skills(reg, "ship it", config=cfg)[0]["name"] == "review"

    def broken(*_: Any) -> Any:
        raise ConnectionError("bridge down")

    cfg = SkillMatch.parse({"strategy": "embedding", "host": broken})
    with pytest.warns(RuntimeWarning, match="bridge down"):
        assert match_skills(reg, "ship the release", config=cfg)[0]["name"] == "ship"


@pytest.mark.parametrize(
    ("options", "where"),
    [
        ({"skills": [{"name": "x", "descripton": "typo"}]}, "skills.descripton"),
        ({"skills": [SHIP], "skill_match": {"strategy": "vibes"}}, "skill_match.strategy"),
        ({"skills": [SHIP], "skill_match": {"top_n": -1}}, "skill_match.top_n"),
        ({"skills": [SHIP], "skill_match": {"strategy": "host"}}, "skill_match.host"),
        ({"skill_match": {"top_n": 1}}, "skill_match"),
        ({"skills": [SHIP, SHIP]}, "skills.ship"),
        ({"skills": [{"name": "x", "allowed_tools": "read"}], "working_files": 3}, "working_files"),
    ],
)
def test_bad_skill_options_name_the_field(options: dict[str, Any], where: str) -> None:
    with pytest.raises(AgentOptionError) as err:
        agent_loop("x", provider=MockProvider(["ok"]), **options)
    assert err.value.option == where
