"""step_judge, stalled done judges, cadence, max_verify_attempts, output schemas,
require_action_or_yield in native mode, next_options and ask_user."""

from __future__ import annotations

import json
from typing import Any

import pytest

from charter.agent import AgentOptionError, MockProvider, agent_loop

from .conftest import Recorder, tc


def _events(result: Any, kind: str) -> list[dict[str, Any]]:
    return [e for e in result.trace["events"] if e["type"] == kind]


def test_step_judge_replace_regenerates_and_the_rejected_call_never_runs(rec: Recorder) -> None:
    verdicts = iter([{"verdict": "reject", "next_step": "read the file first"}, True, True])
    provider = MockProvider([tc("delete", path="a"), tc("look"), "done"])
    result = agent_loop(
        "x",
        provider=provider,
        tools=[rec.tool("delete", level="workspace_write"), rec.tool("look")],
        loop_until_done=True,
        step_judge={"judge": lambda state: next(verdicts)},
    )
    assert rec.names() == ["look"]
    decisions = _events(result, "step_judge_decision")
    assert [d["verdict"] for d in decisions if not d["skipped"]] == ["reject", "accept"]
    # the rejected turn was replaced: it is not in the history, the feedback is
    msgs = result.transcript["messages"]
    assert not any("delete" in json.dumps(m.get("tool_calls") or []) for m in msgs)
    assert "read the file first" in str(provider.requests[1].messages[-1]["content"])
    assert result.to_dict()["step_judge"] == {"invocations": 2, "vetoes": 1}


def test_step_judge_retain_keeps_the_turn_and_answers_its_calls(rec: Recorder) -> None:
    provider = MockProvider([tc("delete", path="a"), "done"])
    result = agent_loop(
        "x",
        provider=provider,
        tools=[rec.tool("delete", level="workspace_write")],
        loop_until_done=True,
        step_judge={"judge": lambda state: False, "on_veto": "retain"},
    )
    assert rec.names() == []
    roles = [m["role"] for m in result.transcript["messages"]]
    assert roles[:4] == ["user", "assistant", "tool", "user"]
    assert "not executed" in result.transcript["messages"][2]["content"]


def test_model_step_judge_fails_closed_and_max_attempts_bounds_it(rec: Recorder) -> None:
    provider = MockProvider(
        [tc("act"), tc("act"), tc("act"), "done"],
        judge_turns=["I think it is fine?"],  # unreadable: a rejection
    )
    result = agent_loop(
        "x",
        provider=provider,
        tools=[rec.tool("act")],
        loop_until_done=True,
        step_judge={"max_attempts": 2},
    )
    judged = [d for d in _events(result, "step_judge_decision") if not d["skipped"]]
    assert [d["verdict"] for d in judged] == ["reject", "reject"]
    assert "could not be read" in judged[0]["reasoning"]
    skipped = [d for d in _events(result, "step_judge_decision") if d["skipped"]]
    assert skipped[0]["reason"].startswith("max_attempts")
    assert rec.names() == ["act"]  # only the third attempt ran


def test_step_judge_skips_when_no_regeneration_turn_remains(rec: Recorder) -> None:
    result = agent_loop(
        "x",
        provider=MockProvider([tc("act")]),
        tools=[rec.tool("act")],
        max_iterations=1,
        step_judge={"judge": lambda s: False},
    )
    assert rec.names() == ["act"]
    assert _events(result, "step_judge_decision")[0]["reason"] == "no regeneration turn remains"


def test_stalled_done_judge_stops_before_the_repeated_call(rec: Recorder) -> None:
    provider = MockProvider([tc("poll")] * 6)
    result = agent_loop(
        "x",
        provider=provider,
        tools=[rec.tool("poll")],
        loop_until_done=True,
        stall_diagnostics={"threshold": 3},
        done_judge={"judge": lambda s: True, "cadence": {"when": "stalled"}},
    )
    assert rec.names() == ["poll", "poll"]  # the third, stalling call never ran
    assert result.stop_reason == "stalled_done_judge" and result.status == "done"
    decision = _events(result, "JudgeDecision")[0]
    assert decision["trigger"] == "stalled" and decision["verdict"] == "done"
    last = result.transcript["messages"][-1]
    assert last["role"] == "tool" and "not executed" in last["content"]


def test_stalled_done_judge_continue_keeps_the_stall_feedback(rec: Recorder) -> None:
    result = agent_loop(
        "x",
        provider=MockProvider([tc("poll")] * 3 + ["done"]),
        tools=[rec.tool("poll")],
        loop_until_done=True,
        stall_diagnostics={"threshold": 3},
        done_judge={
            "judge": lambda s: {"verdict": "continue", "next_step": "x"},
            "cadence": {"when": "stalled"},
        },
    )
    assert rec.names() == ["poll"] * 3
    assert result.to_dict()["suspected_loop"] is True
    # ordinary completion is not judged under when=stalled
    assert [d["trigger"] for d in _events(result, "JudgeDecision")] == ["stalled"]


def test_verify_judge_cadence_and_max_verify_attempts(rec: Recorder) -> None:
    calls: list[int] = []

    def judge(state: dict[str, Any]) -> bool:
        calls.append(state["iteration"])
        return False

    result = agent_loop(
        "x",
        provider=MockProvider([tc("act"), "a", tc("act"), "b", "c", "d"]),
        tools=[rec.tool("act")],
        loop_until_done=True,
        verify_completion_judge={"judge": judge, "cadence": {"every": 2}, "max_invocations": 0},
        max_verify_attempts=2,
    )
    assert calls == [2, 4]  # candidates at 2 and 4; every: 2 judges both
    assert result.status == "verify_capped" and result.stop_reason == "max_verify_attempts"


def test_output_schema_with_retries() -> None:
    schema = {
        "type": "object",
        "properties": {"severity": {"enum": ["low", "high"]}},
        "required": ["severity"],
    }
    provider = MockProvider(['{"severity": "medium"}', 'Sure:\n```json\n{"severity": "high"}\n```'])
    result = agent_loop(
        "x", provider=provider, loop_until_done=True, output_schema=schema, schema_retries=1
    )
    assert result.status == "done" and result.to_dict()["data"] == {"severity": "high"}
    assert "at severity" in str(provider.requests[1].messages[-1]["content"])
    failed = agent_loop(
        "x",
        provider=MockProvider(["not json at all"]),
        loop_until_done=True,
        output_schema=schema,
    )
    assert failed.status == "failed" and failed.stop_reason == "output_schema_invalid"
    # the verifier profile retries three times by default
    verifier = agent_loop(
        "x",
        provider=MockProvider(["a", "b", "c", '{"severity": "low"}']),
        profile="verifier",
        loop_until_done=True,
        output_schema=schema,
    )
    assert verifier.status == "done" and verifier.to_dict()["data"] == {"severity": "low"}
    with pytest.raises(AgentOptionError, match="output_schema"):
        agent_loop("x", output_schema={"type": "nonsense"})


def test_require_action_or_yield_in_native_mode(rec: Recorder) -> None:
    provider = MockProvider(["I think we are good", tc("act"), "finished ##DONE##"])
    result = agent_loop(
        "x",
        provider=provider,
        tools=[rec.tool("act")],
        loop_until_done=True,
        turn_policy={"require_action_or_yield": True},
    )
    assert result.status == "done" and result.llm.iterations == 3 and rec.names() == ["act"]
    assert "##DONE##" in str(provider.requests[1].messages[-1]["content"])  # the nudge says how
    plain = agent_loop("x", provider=MockProvider(["I think we are good"]), loop_until_done=True)
    assert plain.llm.iterations == 1


def test_next_options_apply_to_the_next_iteration_only(rec: Recorder) -> None:
    provider = MockProvider([tc("act"), tc("act"), "done"])

    def post(turn: dict[str, Any]) -> Any:
        if turn["iteration"] == 1:
            return {"next_options": {"model": "big-model", "temperature": 0.1}}
        return None

    agent_loop(
        "x",
        provider=provider,
        model="small-model",
        tools=[rec.tool("act")],
        loop_until_done=True,
        post_turn_callback=post,
    )
    models = [r.model for r in provider.requests]
    assert models == ["small-model", "big-model", "small-model"]
    assert provider.requests[1].options.get("temperature") == 0.1
    assert "temperature" not in provider.requests[2].options
    with pytest.raises(AgentOptionError, match="next_options: unsupported key"):
        agent_loop(
            "x",
            provider=MockProvider([tc("act"), "done"]),
            tools=[rec.tool("act")],
            post_turn_callback=lambda t: {"next_options": {"colour": "red"}},
        )


def test_ask_user_option_answers_the_model() -> None:
    provider = MockProvider([tc("ask_user", question="Which database?"), "ok"])
    asked: list[str] = []
    result = agent_loop(
        "x",
        provider=provider,
        loop_until_done=True,
        ask_user=lambda q: asked.append(q) or "PostgreSQL",
    )
    assert asked == ["Which database?"]
    assert "PostgreSQL" in str(provider.requests[1].messages[-1]["content"])
    assert result.tools.successful == ["ask_user"]


def test_judge_calls_go_through_the_llm_caller() -> None:
    from charter.agent import with_escalation

    cheap = MockProvider(["answer", "answer"])
    frontier = MockProvider([], judge_turns=['{"verdict": "done"}'])
    result = agent_loop(
        "x",
        provider=cheap,
        loop_until_done=True,
        done_judge=True,
        llm_caller=with_escalation(
            cheap, frontier, lambda call: call["request"].purpose == "judge"
        ),
    )
    # the turn went to the cheap tier, the judge to the frontier tier
    assert [r.purpose for r in cheap.requests] == ["turn"]
    assert [r.purpose for r in frontier.requests] == ["judge"]
    assert result.status == "done"
