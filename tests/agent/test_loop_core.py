from __future__ import annotations

import asyncio
import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from charter.agent import (
    AgentOptionError,
    MockProvider,
    ProviderError,
    agent_loop,
    agent_loop_async,
    agent_turn,
    compose,
    default_llm_caller,
    make_tool,
    with_fallback,
    with_retry,
)

from .conftest import Recorder, tc

TOP_KEYS = {
    "status",
    "error",
    "text",
    "visible_text",
    "llm",
    "tools",
    "deferred_user_messages",
    "task_ledger",
    "trace",
    "transcript",
}


def test_result_shape_is_namespaced(rec: Recorder) -> None:
    provider = MockProvider(
        [
            {**tc("look"), "usage": {"input_tokens": 10, "output_tokens": 3}},
            {"text": "all done", "usage": {"input_tokens": 20, "output_tokens": 5}},
        ]
    )
    result = agent_loop("go", "sys", provider=provider, tools=[rec.tool("look")])
    d = result.to_dict()
    assert set(d) == TOP_KEYS
    assert d["status"] == "done"
    assert d["error"] is None
    assert set(d["llm"]) == {"iterations", "duration_ms", "input_tokens", "output_tokens"}
    assert d["llm"]["iterations"] == 2
    assert (d["llm"]["input_tokens"], d["llm"]["output_tokens"]) == (30, 8)
    assert d["tools"] == {
        "calls": ["look"],
        "successful": ["look"],
        "rejected": [],
        "mode": "native",
    }
    assert d["visible_text"] == "all done"
    assert d["deferred_user_messages"] == []
    assert rec.names() == ["look"]
    roles = [m["role"] for m in d["transcript"]["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
    json.dumps(d)  # serialisable


def test_unknown_option_is_named() -> None:
    with pytest.raises(AgentOptionError, match=r"max_iteration'.*did you mean max_iterations"):
        agent_loop("x", provider=MockProvider(["hi"]), max_iteration=3)


@pytest.mark.parametrize(
    "opts",
    [
        {"max_iterations": 0},
        {"max_iterations": -1},
        {"max_iterations": True},
        {"iteration_budget": {"mode": "adaptive", "initial": 5, "max": 4}},
        {"iteration_budget": {"mode": "adaptive", "extend_by": 0}},
        {"iteration_budget": {"mode": "fixed", "max": 0}},
        {"iteration_budget": {"mode": "sometimes"}},
        {"iteration_budget": {"initial": 1, "maxx": 3}},
    ],
)
def test_invalid_budget_raises_before_first_call(opts: dict[str, Any]) -> None:
    provider = MockProvider(["hi"])
    with pytest.raises(AgentOptionError):
        agent_loop("x", provider=provider, **opts)
    assert provider.requests == []


def test_not_loop_until_done_returns_after_text() -> None:
    provider = MockProvider(["first", "second"])
    result = agent_loop("x", provider=provider)
    assert result.status == "done"
    assert result.text == "first"
    assert len(provider.requests) == 1


def test_text_mode_tool_calls_and_sentinel(rec: Recorder) -> None:
    provider = MockProvider(
        [
            {"text": "reading ", "text_tool_calls": [{"name": "look", "arguments": {}}]},
            "thinking without finishing",
            "finished <done>##DONE##</done>",
        ]
    )
    result = agent_loop(
        "x",
        provider=provider,
        tools=[rec.tool("look")],
        tool_format="text",
        loop_until_done=True,
    )
    assert result.status == "done"
    assert result.tools.mode == "text"
    assert rec.names() == ["look"]
    assert "<tool_call>" not in result.visible_text and "##DONE##" not in result.visible_text
    assert "##DONE##" in result.text
    first = provider.requests[0]
    assert first.tools == []  # text mode teaches tools in the system prompt
    assert first.system is not None and "<tool_call>" in first.system
    assert "<done>##DONE##</done>" in first.system
    # the tool result is fed back as a <tool_result> user message, then a nudge
    second = provider.requests[1].messages
    assert second[-1]["role"] == "user" and "<tool_result" in second[-1]["content"]
    assert result.task_ledger["nudges"] == 1


def test_none_mode_bare_sentinel_and_stuck() -> None:
    provider = MockProvider(["a", "b", "c", "d"])
    result = agent_loop(
        "x", provider=provider, tool_format="none", loop_until_done=True, max_nudges=2
    )
    assert result.status == "stuck"
    assert result.llm.iterations == 3
    nudge = provider.requests[1].messages[-1]["content"]
    assert "##DONE##" in nudge and "<done>" not in nudge
    ok = agent_loop(
        "x",
        provider=MockProvider(["working", "ok ##DONE##"]),
        tool_format="none",
        loop_until_done=True,
    )
    assert ok.status == "done" and ok.visible_text == "working\nok"


def test_custom_nudge_and_done_sentinel() -> None:
    provider = MockProvider(["a", "FIN"])
    result = agent_loop(
        "x", provider=provider, loop_until_done=True, done_sentinel="FIN", nudge="keep going!"
    )
    assert result.status == "done"
    assert provider.requests[1].messages[-1]["content"] == "keep going!"


def test_native_loop_until_done_completes_on_final_text(rec: Recorder) -> None:
    provider = MockProvider([tc("look"), "final answer"])
    result = agent_loop("x", provider=provider, tools=[rec.tool("look")], loop_until_done=True)
    assert result.status == "done"
    assert "final text with no tool calls" in (provider.requests[0].system or "")


def test_budget_exhausted(rec: Recorder) -> None:
    provider = MockProvider([tc("look")], cycle=True)
    result = agent_loop("x", provider=provider, tools=[rec.tool("look")], max_iterations=3)
    assert result.status == "budget_exhausted"
    assert result.llm.iterations == 3
    assert len(rec.calls) == 3


@pytest.mark.parametrize(
    ("profile", "iterations", "status"),
    [("completer", 1, "budget_exhausted"), ("verifier", 5, "budget_exhausted")],
)
def test_profile_defaults(rec: Recorder, profile: str, iterations: int, status: str) -> None:
    provider = MockProvider([tc("look")], cycle=True)
    result = agent_loop("x", provider=provider, tools=[rec.tool("look")], profile=profile)
    assert (result.status, result.llm.iterations) == (status, iterations)
    # explicit keys override the profile
    provider = MockProvider([tc("look")], cycle=True)
    result = agent_loop(
        "x", provider=provider, tools=[rec.tool("look")], profile=profile, max_iterations=2
    )
    assert result.llm.iterations == 2


def test_researcher_profile_max_nudges() -> None:
    provider = MockProvider(["x"], cycle=True)
    result = agent_loop(
        "x", provider=provider, profile="researcher", loop_until_done=True, tool_format="text"
    )
    assert result.status == "stuck" and result.llm.iterations == 5  # 4 nudges + 1


def test_bad_profile() -> None:
    with pytest.raises(AgentOptionError, match="profile"):
        agent_loop("x", provider=MockProvider(["a"]), profile="wizard")


def test_provider_error_is_structured() -> None:
    provider = MockProvider(
        [
            tc("look"),
            {"error": {"category": "rate_limit", "message": "slow down", "status_code": 429}},
        ]
    )
    rec = Recorder()
    result = agent_loop("x", provider=provider, tools=[rec.tool("look")], llm_retries=0, model="m1")
    assert result.status == "provider_error"
    assert result.error == {
        "category": "rate_limit",
        "reason": "rate_limit",
        "kind": "MockProviderError",
        "provider": "mock",
        "model": "m1",
        "message": "slow down",
        "phase": "turn",
        "tool_format": "native",
        "after_tool_result": True,
    }


def test_llm_retries_retry_transient_errors() -> None:
    provider = MockProvider([{"error": {"category": "server", "message": "boom"}}, "ok"])
    result = agent_loop("x", provider=provider, llm_retries=1, llm_backoff_ms=0)
    assert result.status == "done" and result.visible_text == "ok"


def test_llm_caller_compose_retry_and_fallback() -> None:
    flaky = MockProvider([{"error": {"category": "server", "message": "down"}}] * 5)
    backup = MockProvider(["from backup"])
    sleeps: list[float] = []

    async def sleep(s: float) -> None:
        sleeps.append(s)

    caller = compose([with_fallback(backup), with_retry(max_attempts=3, base_ms=10, sleep=sleep)])(
        default_llm_caller(flaky)
    )
    result = agent_loop("x", provider=flaky, llm_caller=caller)
    assert result.status == "done" and result.visible_text == "from backup"
    assert len(flaky.requests) == 3 and len(sleeps) == 2
    # exponential back-off with up to base_ms of jitter: 10-20 ms, then 20-30 ms
    assert 0.01 <= sleeps[0] <= 0.02 and 0.02 <= sleeps[1] <= 0.03


def test_llm_retries_next_to_llm_caller_warn_and_still_retry() -> None:
    provider = MockProvider([{"error": {"category": "server", "message": "boom"}}, "ok"])
    with pytest.warns(DeprecationWarning, match="llm_retries/llm_backoff_ms are deprecated"):
        result = agent_loop(
            "x",
            provider=provider,
            llm_caller=default_llm_caller(provider),
            llm_retries=1,
            llm_backoff_ms=0,
        )
    assert result.status == "done" and result.visible_text == "ok"
    assert len(provider.requests) == 2
    # an llm_caller alone: no legacy retry wrapped around it, no warning
    provider = MockProvider([{"error": {"category": "server", "message": "boom"}}, "ok"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = agent_loop("x", provider=provider, llm_caller=default_llm_caller(provider))
    assert result.status == "provider_error" and len(provider.requests) == 1


def test_with_retry_does_not_retry_client_errors() -> None:
    provider = MockProvider([{"error": {"category": "client", "message": "bad request"}}, "x"])
    caller = with_retry(max_attempts=4, backoff="none")(default_llm_caller(provider))
    result = agent_loop("x", provider=provider, llm_caller=caller)
    assert result.status == "provider_error" and len(provider.requests) == 1


def test_custom_llm_caller_sees_turn_info() -> None:
    seen: list[dict[str, Any]] = []
    provider = MockProvider(["hi"])
    inner = default_llm_caller(provider)

    async def caller(call: dict[str, Any]) -> dict[str, Any]:
        seen.append(call["turn"])
        return await inner(call)

    agent_loop("x", provider=provider, llm_caller=caller, session_id="s1")
    assert seen == [{"iteration": 1, "session_id": "s1", "attempt": 1}]


def test_tool_retries_and_backoff() -> None:
    attempts: list[int] = []

    def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise RuntimeError("transient")
        return "fine"

    tool = make_tool(flaky, side_effect_level="none")
    provider = MockProvider([tc("flaky"), "done"])
    result = agent_loop("x", provider=provider, tools=[tool], tool_retries=2, tool_backoff_ms=0)
    assert result.tools.successful == ["flaky"] and len(attempts) == 3
    attempts.clear()
    provider = MockProvider([tc("flaky"), "done"])
    result = agent_loop("x", provider=provider, tools=[tool], tool_backoff_ms=0)
    assert result.tools.rejected == ["flaky"] and len(attempts) == 1
    obs = result.transcript["messages"][2]["content"]
    assert "RuntimeError: transient" in obs


def test_max_concurrent_tools_records_emitted_order() -> None:
    order: list[str] = []

    async def slow(tag: str, delay: float) -> str:
        await asyncio.sleep(delay)
        order.append(tag)
        return tag

    tool = make_tool(slow, side_effect_level="none")
    calls = [
        {"name": "slow", "arguments": {"tag": "a", "delay": 0.05}},
        {"name": "slow", "arguments": {"tag": "b", "delay": 0.0}},
        {"name": "slow", "arguments": {"tag": "c", "delay": 0.02}},
    ]
    provider = MockProvider([{"tool_calls": calls}, "done"])
    result = agent_loop("x", provider=provider, tools=[tool], max_concurrent_tools=3)
    assert order == ["b", "c", "a"]  # completed out of order...
    tool_msgs = [m for m in result.transcript["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_msgs] == ["a", "b", "c"]  # ...recorded in emitted order


def test_require_successful_tools_with_or_groups(rec: Recorder) -> None:
    tools = [rec.tool("run"), rec.tool("tail"), rec.tool("out")]
    ok = agent_loop(
        "x",
        provider=MockProvider([tc("run"), tc("tail"), "done"]),
        tools=tools,
        require_successful_tools=["run", ["out", "tail"]],
    )
    assert ok.status == "done"
    failed = agent_loop(
        "x",
        provider=MockProvider([tc("run"), "done"]),
        tools=tools,
        require_successful_tools=["run", ["out", "tail"]],
    )
    assert failed.status == "failed"
    assert failed.task_ledger["required_tools_missing"] == [["out", "tail"]]
    with pytest.raises(AgentOptionError):
        agent_loop("x", provider=MockProvider(["a"]), require_successful_tools=[[]])


def test_stop_after_successful_tools(rec: Recorder) -> None:
    provider = MockProvider([tc("look"), tc("edit"), tc("look"), "never"])
    result = agent_loop(
        "x",
        provider=provider,
        tools=[rec.tool("look"), rec.tool("edit")],
        stop_after_successful_tools=["edit"],
        loop_until_done=True,
    )
    assert result.status == "done" and result.llm.iterations == 2
    assert result.trace["stop_reason"] == "stop_after_successful_tools"


def test_post_turn_callback_string_bool_dict(rec: Recorder) -> None:
    seen: list[dict[str, Any]] = []

    def inject(turn: dict[str, Any]) -> Any:
        seen.append(turn)
        return "please summarise" if turn["iteration"] == 1 else ""

    provider = MockProvider([tc("look"), "summary"])
    agent_loop("x", provider=provider, tools=[rec.tool("look")], post_turn_callback=inject)
    assert seen[0]["tool_results"][0]["tool_name"] == "look"
    assert seen[0]["tool_results"][0]["ok"] is True
    assert provider.requests[1].messages[-1] == {"role": "user", "content": "please summarise"}

    provider = MockProvider([tc("look"), tc("look"), "x"])
    result = agent_loop(
        "x", provider=provider, tools=[rec.tool("look")], post_turn_callback=lambda t: True
    )
    assert result.status == "done" and result.llm.iterations == 1
    assert result.to_dict()["stop_reason"] == "post_turn_stop"

    def finalize(turn: dict[str, Any]) -> Any:
        if "look" in turn["session_successful_tools"]:
            return {"message": "final now", "llm_options": {"tool_choice": "none"}}
        return None

    provider = MockProvider([tc("look"), "final"])
    agent_loop("x", provider=provider, tools=[rec.tool("look")], post_turn_callback=finalize)
    assert provider.requests[1].tool_choice == "none"
    assert provider.requests[1].messages[-1]["content"] == "final now"

    provider = MockProvider([tc("look"), "final"])
    result = agent_loop(
        "x",
        provider=provider,
        tools=[rec.tool("look")],
        post_turn_callback=lambda t: {"stop": True, "stop_reason": "enough"},
    )
    assert result.to_dict()["stop_reason"] == "enough"


def test_context_callback_rewrites_visible_not_recorded(rec: Recorder) -> None:
    def hide(ctx: dict[str, Any]) -> Any:
        kept = [m for m in ctx["visible_messages"] if m["role"] != "assistant"]
        return {"messages": kept, "system": "rewritten"}

    provider = MockProvider([tc("look"), "done"])
    result = agent_loop(
        "x", "orig", provider=provider, tools=[rec.tool("look")], context_callback=hide
    )
    second = provider.requests[1]
    assert second.system == "rewritten"
    assert all(m["role"] != "assistant" for m in second.messages)
    assert any(m["role"] == "assistant" for m in result.transcript["messages"])


def test_timestamp_and_message_decorator() -> None:
    provider = MockProvider(["ok"])
    agent_loop(
        "hello",
        provider=provider,
        timestamp_messages=True,
        clock=lambda: 0.0,
        message_decorator=lambda m, ctx: {**m, "content": m["content"] + f" #{ctx['index']}"},
    )
    assert provider.requests[0].messages[0]["content"] == "[1970-01-01T00:00:00+00:00] hello #0"


def test_llm_transcript_dir(tmp_path: Path) -> None:
    provider = MockProvider(["one"])
    agent_loop("x", provider=provider, llm_transcript_dir=str(tmp_path), session_id="abc")
    lines = (tmp_path / "llm_transcript.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["type"] for r in records] == ["message", "response"]
    assert records[0]["session_id"] == "abc" and records[1]["text"] == "one"
    assert records[0]["message"] == {"role": "user", "content": "x"}
    assert records[1]["provider"] == "mock"


def test_llm_transcript_writes_each_message_once(tmp_path: Path) -> None:
    provider = MockProvider([tc("look"), tc("look"), "done"])
    agent_loop(
        "x", provider=provider, tools=[Recorder().tool("look")], llm_transcript_dir=str(tmp_path)
    )
    records = [json.loads(x) for x in (tmp_path / "llm_transcript.jsonl").read_text().splitlines()]
    assert "request" not in {r["type"] for r in records}
    replay = [r["message"] for r in records if r["type"] == "message"]
    assert [r["index"] for r in records if r["type"] == "message"] == list(range(len(replay)))
    # the replayed messages are exactly the last prompt the model saw
    assert replay == provider.requests[-1].messages


def test_llm_transcript_snapshot_when_history_rewritten(tmp_path: Path) -> None:
    provider = MockProvider([tc("look"), "done"])

    def last_only(ctx: dict[str, Any]) -> list[Any]:
        return ctx["messages"][-1:]

    agent_loop(
        "x",
        provider=provider,
        tools=[Recorder().tool("look")],
        context_callback=last_only,
        llm_transcript_dir=str(tmp_path),
    )
    records = [json.loads(x) for x in (tmp_path / "llm_transcript.jsonl").read_text().splitlines()]
    kinds = [r["type"] for r in records]
    assert kinds == ["message", "response", "request", "response"]
    assert records[2]["messages"] == provider.requests[1].messages


def test_session_id_continues_conversation() -> None:
    provider = MockProvider(["first reply", "second reply"])
    agent_loop("q1", provider=provider, session_id="chat-1")
    agent_loop("q2", provider=provider, session_id="chat-1")
    contents = [m["content"] for m in provider.requests[1].messages]
    assert contents == ["q1", "first reply", "q2"]


def test_native_tool_fallback_modes(rec: Recorder) -> None:
    text_call = {"text_tool_calls": [{"name": "look", "arguments": {}}]}
    allow = agent_loop("x", provider=MockProvider([text_call, "done"]), tools=[rec.tool("look")])
    assert allow.status == "done" and rec.names() == ["look"]
    assert allow.trace["native_text_tool_fallbacks"] == 1

    rec.calls.clear()
    once = agent_loop(
        "x",
        provider=MockProvider([text_call, text_call, "done"]),
        tools=[rec.tool("look")],
        native_tool_fallback="allow_once",
    )
    assert rec.names() == ["look"]
    assert once.trace["native_text_tool_fallback_rejections"] == 1
    assert once.status == "done"

    rec.calls.clear()
    rejected = agent_loop(
        "x",
        provider=MockProvider([text_call, "done"]),
        tools=[rec.tool("look")],
        native_tool_fallback="reject",
    )
    assert rejected.status == "provider_error" and rec.calls == []
    assert rejected.error is not None and rejected.error["category"] == "tool_protocol"


def test_adaptive_budget_extends_on_progress(rec: Recorder) -> None:
    provider = MockProvider([tc("look")] * 5 + ["done"])
    result = agent_loop(
        "x",
        provider=provider,
        tools=[rec.tool("look")],
        iteration_budget={"mode": "adaptive", "initial": 2, "max": 8, "extend_by": 2},
    )
    assert result.status == "done" and result.llm.iterations == 6
    budget = result.to_dict()["adaptive_budget"]
    assert budget["extensions_used"] == 2 and budget["final_limit"] == 6
    assert [d["action"] for d in budget["decisions"]] == ["extend", "extend"]
    assert budget["decisions"][0]["reason"] == "recent turn made progress"


def test_adaptive_budget_caps_at_max(rec: Recorder) -> None:
    provider = MockProvider([tc("look")], cycle=True)
    result = agent_loop(
        "x", provider=provider, tools=[rec.tool("look")], iteration_budget="adaptive"
    )
    assert result.status == "budget_exhausted" and result.llm.iterations == 16


def test_loop_control_stop_and_extend(rec: Recorder) -> None:
    states: list[dict[str, Any]] = []

    def control(state: dict[str, Any]) -> Any:
        states.append(state)
        if state["iteration"] == 2:
            return {"action": "stop", "status": "incomplete", "reason": "enough"}
        return None

    provider = MockProvider([tc("look")], cycle=True)
    result = agent_loop("x", provider=provider, tools=[rec.tool("look")], loop_control=control)
    assert result.status == "incomplete" and result.llm.iterations == 2
    assert states[0]["budget"]["remaining"] == 49
    assert states[0]["turn"]["successful_tool_names"] == ["look"]
    assert states[0]["progress"]["changed"] is True

    provider = MockProvider([tc("look")], cycle=True)
    result = agent_loop(
        "x",
        provider=provider,
        tools=[rec.tool("look")],
        max_iterations=1,
        iteration_budget={"mode": "fixed", "max": 4, "initial": 1},
        loop_control=lambda s: (
            {"action": "extend", "until": 3, "reason": "r"} if s["iteration"] == 1 else None
        ),
    )
    assert result.status == "budget_exhausted" and result.llm.iterations == 3


def test_verify_completion_veto_then_accept() -> None:
    calls: list[int] = []

    def verify(state: dict[str, Any]) -> Any:
        calls.append(state["iteration"])
        return "add tests first" if len(calls) == 1 else None

    provider = MockProvider(["v1", "v2"])
    result = agent_loop("x", provider=provider, verify_completion=verify)
    assert result.status == "done" and calls == [1, 2]
    assert provider.requests[1].messages[-1]["content"] == "add tests first"


def test_verify_completion_judge_cap() -> None:
    provider = MockProvider(
        ["a"],
        cycle=True,
        judge_turns=['{"verdict": "continue", "next_step": "more"}'],
    )
    result = agent_loop("x", provider=provider, verify_completion_judge={"max_invocations": 2})
    d = result.to_dict()
    assert d["status"] == "verify_capped"
    assert d["stop_reason"] == "completion_judge_cap_reached"
    assert d["completion_judge"] == {
        "invocations": 2,
        "vetoes": 2,
        "max_invocations": 2,
        "cap_reached": True,
    }


def test_done_judge_cap_and_cadence() -> None:
    provider = MockProvider(
        ["a"], cycle=True, judge_turns=['{"verdict": "continue", "reasoning": "no"}']
    )
    result = agent_loop(
        "x", provider=provider, loop_until_done=True, done_judge={"max_invocations": 3}
    )
    d = result.to_dict()
    assert d["status"] == "verify_capped" and d["stop_reason"] == "done_judge_cap_reached"
    assert d["done_judge"]["vetoes"] == 3

    judged: list[int] = []

    def judge(state: dict[str, Any]) -> Any:
        judged.append(state["iteration"])
        return {"verdict": "continue" if len(judged) < 2 else "done"}

    rec = Recorder()
    provider = MockProvider([tc("look"), "a", "b"])
    result = agent_loop(
        "x",
        provider=provider,
        loop_until_done=True,
        tools=[rec.tool("look")],
        done_judge={"judge": judge, "cadence": {"every": 2}},
    )
    # judged on iteration 2 (veto); iteration 3 is not due, so its completion is accepted
    assert result.status == "done" and judged == [2] and result.llm.iterations == 3
    judged.clear()
    provider = MockProvider(["a"], cycle=True)
    result = agent_loop(
        "x",
        provider=provider,
        loop_until_done=True,
        done_judge={"judge": judge, "cadence": {"min_iterations_before_first": 1}},
    )
    assert result.llm.iterations == 1 and judged == []  # first turn skipped


def test_agent_turn_summaries(rec: Recorder) -> None:
    provider = MockProvider(
        [tc("look"), "draft", "final"],
        judge_turns=[
            '{"verdict": "continue", "reasoning": "thin", "next_step": "add evidence"}',
            '{"verdict": "done", "reasoning": "good"}',
        ],
    )
    result = agent_turn(
        "Summarize risks", system="Be concise.", provider=provider, tools=[rec.tool("look")]
    )
    d = result.to_dict()
    assert d["status"] == "done"
    assert [j["verdict"] for j in d["judge_decisions"]] == ["continue", "done"]
    assert d["judge_decisions"][0]["next_step"] == "add evidence"
    assert set(d["judge_decisions"][0]) >= {
        "iteration",
        "verdict",
        "reasoning",
        "next_step",
        "judge_duration_ms",
    }
    assert [i["iteration"] for i in d["iterations"]] == [1, 2, 3]
    assert d["iterations"][0]["tool_count"] == 1
    assert "Be concise." in (provider.requests[0].system or "")
    turns = [r for r in provider.requests if r.purpose == "turn"]
    assert turns[2].messages[-1]["content"] == "add evidence"


def test_stall_diagnostics(rec: Recorder) -> None:
    provider = MockProvider([tc("look", q=1)] * 4 + ["done"])
    result = agent_loop("x", provider=provider, tools=[rec.tool("look")], stall_diagnostics=True)
    d = result.to_dict()
    assert d["repeated_tool_calls"] == 3
    assert d["suspected_loop"] is True and len(d["stall_warnings"]) == 1
    assert d["stall_warnings"][0]["tool"] == "look"
    contents = [m["content"] for m in result.transcript["messages"] if m["role"] == "user"]
    assert any("3 times in a row" in c for c in contents)
    plain = agent_loop("x", provider=MockProvider(["a"]))
    assert "suspected_loop" not in plain.to_dict()


def test_turn_policy_require_action_and_prose() -> None:
    provider = MockProvider(["x" * 50, "##DONE##"])
    result = agent_loop(
        "x",
        provider=provider,
        tool_format="text",
        loop_until_done=True,
        turn_policy={
            "require_action_or_yield": True,
            "allow_done_sentinel": False,
            "max_prose_chars": 10,
        },
    )
    assert result.status == "done"
    msgs = [m["content"] for m in provider.requests[1].messages if m["role"] == "user"]
    assert any("under 10 characters" in m for m in msgs)
    assert "DONE" not in msgs[-1]
    with pytest.raises(AgentOptionError, match="turn_policy"):
        agent_loop("x", provider=MockProvider(["a"]), turn_policy={"bogus": 1})


def test_async_twin_and_fixture_files(tmp_path: Path) -> None:
    fixture = tmp_path / "script.json"
    fixture.write_text(json.dumps({"turns": ["from json"]}))
    result = asyncio.run(agent_loop_async("x", provider=f"mock:{fixture}"))
    assert result.visible_text == "from json"
    yml = tmp_path / "script.yaml"
    yml.write_text("turns:\n  - text: from yaml\n    usage: {input_tokens: 7, output_tokens: 2}\n")
    result = agent_loop("x", provider=f"mock:{yml}")
    assert result.visible_text == "from yaml" and result.llm.input_tokens == 7


def test_mock_script_exhausted_is_provider_error() -> None:
    result = agent_loop(
        "x", provider=MockProvider([tc("nope")]), loop_until_done=True, llm_retries=0
    )
    assert result.status == "provider_error"
    assert result.error is not None and result.error["reason"] == "script_exhausted"


def test_unexpected_provider_exception_is_captured() -> None:
    class Broken:
        name = "broken"

        async def complete(self, request: Any) -> Any:
            raise KeyError("oops")

    result = agent_loop("x", provider=Broken())
    assert result.status == "provider_error"
    assert result.error is not None and result.error["kind"] == "KeyError"


def test_provider_error_class_retryable_defaults() -> None:
    assert ProviderError("x", category="rate_limit").retryable
    assert not ProviderError("x", category="auth").retryable
