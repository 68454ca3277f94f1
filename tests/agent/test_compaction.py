"""Compaction and token counting: long conversations stay under the window."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from charter.agent import AgentOptionError, MockProvider, agent_loop, make_tool
from charter.agent.compaction import (
    _split,
    compact_for_bug_fix_resumption,
    compact_preserving_test_failures,
    compaction_policy,
    parse_config,
)
from charter.agent.projection import squash_failed_calls
from charter.agent.sessions import SessionStore
from charter.agent.tokens import EstimateCounter, MessageCounter, counter_for, tiktoken_ready


def _tool(name: str, fn: Any) -> Any:
    return make_tool(fn, name=name, annotations={"side_effect_level": "read_only"})


def _assert_paired(messages: list[Any]) -> None:
    """Every tool result follows the assistant message that called it, and every call has
    its result: what providers require of a prompt."""
    open_ids: set[str] = set()
    for m in messages:
        if m.get("role") == "tool":
            assert m.get("tool_call_id") in open_ids, f"orphan tool result {m}"
            open_ids.discard(m["tool_call_id"])
        else:
            assert not open_ids, f"calls without results: {open_ids}"
            open_ids = {c["id"] for c in m.get("tool_calls") or []}
    assert not open_ids or messages[-1].get("tool_calls")


def _long_run(turns: int, **options: Any) -> tuple[Any, MockProvider]:
    def run_tests(n: int) -> str:
        if n % 50 == 7:
            return f"FAILED tests/test_core.py::test_case_{n} - AssertionError: expected {n}"
        return f"ran step {n}: " + "ok " * 120

    script: list[Any] = [
        {"tool_calls": [{"name": "run_tests", "arguments": {"n": i}}]} for i in range(turns)
    ]
    # the plan is written once, early, beside a tool call
    script[3] = {"text": "Plan:\n- [x] reproduce\n- [ ] fix the parser\n- [ ] verify", **script[3]}
    script.append("all done")
    provider = MockProvider(script)
    result = agent_loop(
        "fix the parser bug",
        provider=provider,
        tools=[_tool("run_tests", run_tests)],
        loop_until_done=True,
        max_iterations=turns + 5,
        max_nudges=3,
        **options,
    )
    return result, provider


def test_a_500_turn_conversation_stays_under_the_window() -> None:
    threshold = 4000
    result, provider = _long_run(
        500,
        compact_threshold=threshold,
        compact_keep_first=1,
        compaction={"strategy": "hybrid", "keep_last_n": 8},
        compaction_policy=compact_for_bug_fix_resumption(),
    )
    assert result.status == "done" and result.llm.iterations == 501
    counter = MessageCounter(EstimateCounter())
    schemas = json.dumps([t for t in provider.requests[0].tools])
    sizes = [counter.total(r.messages, (r.system or "") + schemas) for r in provider.requests]
    assert max(sizes) <= threshold, max(sizes)
    events = [e for e in result.trace["events"] if e["type"] == "TranscriptCompacted"]
    assert len(events) >= 10
    for e in events:
        assert e["estimated_tokens_after"] < e["estimated_tokens_before"]
        assert e["strategy"] == "hybrid" and e["instruction_mode"] == "bug_fix_resumption"
        assert e["token_method"] == "estimate:lexical"
    last = provider.requests[-1].messages
    _assert_paired(last)
    texts = [str(m.get("content")) for m in last]
    assert texts[0] == "fix the parser bug"  # keep_first
    assert any("<compaction_summary>" in t for t in texts)
    # what a bug fix needs survives 60 compactions: the latest failure verbatim, the plan
    assert any("FAILED tests/test_core.py::test_case_457" in t for t in texts)
    assert any("fix the parser" in t and "[preserved]" in t for t in texts)
    assert "run_tests" not in "".join(t for t in texts if "Files changed" in t)
    # the conversation's last 8 messages are verbatim
    assert texts[-1].startswith("ran step 499") or "499" in texts[-1]


def test_without_compaction_the_prompt_grows() -> None:
    result, provider = _long_run(40)
    assert len(provider.requests[-1].messages) > 80
    assert not [e for e in result.trace["events"] if e["type"] == "TranscriptCompacted"]


def test_custom_strategy_and_callback_as_the_seed_writes_it() -> None:
    seen: list[Any] = []

    def callback(archived: list[Any], reminders: list[str], policy: Any) -> dict[str, str]:
        seen.append(policy)
        return {"summary": f"resume with {policy.mode} over {len(archived)} messages"}

    probe = _tool("probe", lambda: "x" * 50)
    provider = MockProvider([{"tool_calls": [{"name": "probe", "arguments": {}}]}] * 3 + ["ok"])
    agent_loop(
        "task",
        provider=provider,
        tools=[probe],
        compact_threshold=1,
        compact_strategy="custom",
        compact_keep_last=0,
        auto_compact={"policy": compact_for_bug_fix_resumption(author="host")},
        compact_callback=callback,
    )
    assert seen and seen[0].mode == "bug_fix_resumption"
    text = str(provider.requests[0].messages[0]["content"])
    assert "resume with bug_fix_resumption over 1 messages" in text
    # the next turn re-compacts the summary with the new call and its result
    assert "over 3 messages" in str(provider.requests[1].messages[0]["content"])
    assert "Instructions (host)" in text  # scope "summary": the host's guidance is visible


def test_host_only_instructions_stay_out_of_the_summary() -> None:
    provider = MockProvider(["a", "b"], aux_turns=["S"])
    result = agent_loop(
        "task",
        provider=provider,
        loop_until_done=False,
        messages=[{"role": "user", "content": "old " * 400}, {"role": "assistant", "content": "k"}],
        compact_threshold=200,
        compact_keep_last=1,
        compaction_policy=compaction_policy(instructions="internal note", scope="host"),
    )
    summariser, turn = provider.requests[0], provider.requests[1]
    assert summariser.purpose == "compaction" and "internal note" in (summariser.system or "")
    content = str(turn.messages[0]["content"])
    assert "<compaction_summary>\nS" in content and "internal note" not in content
    event = next(e for e in result.trace["events"] if e["type"] == "TranscriptCompacted")
    assert event["compaction_policy"]["instructions"] == "internal note"
    assert event["instruction_source"] == "host"


def test_summariser_model_call_and_hybrid_fallback() -> None:
    msgs = [{"role": "user", "content": f"message {i} " + "pad " * 100} for i in range(6)]
    summ = MockProvider([], aux_turns=["the summary: six messages about padding"])
    provider = MockProvider(["done"])
    result = agent_loop(
        "t",
        provider=provider,
        messages=msgs,
        compact_threshold=300,
        compact_keep_last=2,
        compaction={"strategy": "summarize_middle", "provider": summ},
    )
    assert summ.requests and summ.requests[0].purpose == "compaction"
    assert "the summary: six messages" in str(provider.requests[0].messages[0]["content"])
    huge = MockProvider([], aux_turns=["blah " * 5000])
    provider2 = MockProvider(["done"])
    result = agent_loop(
        "t",
        provider=provider2,
        messages=msgs,
        compact_threshold=300,
        compact_keep_last=2,
        compaction={"strategy": "hybrid", "provider": huge},
    )
    event = next(e for e in result.trace["events"] if e["type"] == "TranscriptCompacted")
    assert event["engine_strategy"] == "truncate"  # the summary was over the limit
    assert "earlier messages, abbreviated" in str(provider2.requests[0].messages[0]["content"])


def test_drop_tool_outputs_keeps_everything_but_old_bodies() -> None:
    probe = _tool("probe", lambda n: f"output {n} " + "z" * 400)
    script = [{"tool_calls": [{"name": "probe", "arguments": {"n": i}}]} for i in range(12)]
    provider = MockProvider([*script, "done"])
    agent_loop(
        "t",
        provider=provider,
        tools=[probe],
        loop_until_done=True,
        compact_threshold=900,
        compaction={"strategy": "drop_tool_outputs", "keep_last_n": 4},
    )
    last = provider.requests[-1].messages
    _assert_paired(last)
    stubs = [m for m in last if "dropped by compaction" in str(m.get("content"))]
    assert stubs and all(m["role"] == "tool" for m in stubs)
    assert "output 11 " in str(last[-1]["content"])


def test_compaction_rewrites_the_session(_session_dir: Any) -> None:
    msgs = [{"role": "user", "content": "pad " * 300} for _ in range(4)]
    agent_loop(
        "t",
        provider=MockProvider(["done"]),
        messages=msgs,
        session_id="s-compact",
        compact_threshold=200,
        compact_keep_last=1,
        compaction="truncate",
    )
    records = list(SessionStore(_session_dir).records("s-compact"))
    assert [r["type"] for r in records].count("reset") == 1
    stored = SessionStore(_session_dir).load("s-compact").messages
    assert "<compaction_summary>" in str(stored[0]["content"]) and len(stored) == 3


def test_token_counts_match_the_provider() -> None:
    if not tiktoken_ready():
        if os.environ.get("CI") == "true":
            pytest.fail("tiktoken encodings missing: run make tokenizers")
        pytest.skip("tiktoken encodings not installed (make tokenizers)")
    counter = counter_for("openai", "gpt-4o")
    assert counter.method == "tiktoken:o200k_base"
    assert counter.text("hello world") == 2
    assert counter_for("openai", "gpt-4").method == "tiktoken:cl100k_base"
    assert counter_for("anthropic", "claude-sonnet-4").method == "estimate:lexical"
    # OpenAI's chat format: 3 per message + 3 for the reply priming
    mc = MessageCounter(counter)
    assert mc.total([{"role": "user", "content": "hello world"}]) == 2 + 3 + 3


def test_model_aware_default_threshold_and_option_errors() -> None:
    cfg = parse_config({}, "gpt-4o-mini")
    assert cfg is not None and cfg.threshold == 102_400 and cfg.keep_last == 10
    unknown = parse_config({}, None)  # learnt from the provider when the run starts
    assert unknown is not None and unknown.threshold is None
    assert parse_config({"compaction": False, "compact_threshold": 5}, "gpt-4o") is None
    with pytest.raises(AgentOptionError, match=r"custom.*needs compact_callback"):
        agent_loop("x", compact_strategy="custom", compact_threshold=5)
    with pytest.raises(AgentOptionError, match="compaction"):
        agent_loop("x", compaction="squash")
    with pytest.raises(AgentOptionError, match="preserve"):
        compaction_policy(preserve=["vibes"])
    with pytest.raises(AgentOptionError, match="compact_callback"):
        agent_loop("x", compact_callback=lambda *a: "s", compact_threshold=5)
    assert compact_preserving_test_failures().preserve == ("test_failures",)


_ROLES = st.sampled_from(["user", "assistant", "call1", "call2"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_ROLES, max_size=30), st.integers(0, 6), st.integers(0, 12))
def test_split_never_orphans_a_tool_result(roles: list[str], first: int, last: int) -> None:
    # what the loop builds: every call message is followed by all of its results
    messages: list[dict[str, Any]] = []
    for r in roles:
        if r.startswith("call"):
            ids = [f"c{len(messages)}_{k}" for k in range(int(r[-1]))]
            messages.append({"role": "assistant", "tool_calls": [{"id": i} for i in ids]})
            messages.extend({"role": "tool", "tool_call_id": i} for i in ids)
        else:
            messages.append({"role": r, "content": r})
    start, end = _split(messages, first, last)
    assert 0 <= start <= end <= len(messages)
    if end < len(messages):
        assert messages[end].get("role") != "tool"
    if start < end:
        assert messages[start].get("role") != "tool"
        kept = [*messages[:start], {"role": "user", "content": "summary"}, *messages[end:]]
        _assert_paired(kept)


# -- transcript_projection --------------------------------------------------------------


def _tool_turn(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": args, "id": call_id}]}


def test_projections_change_the_request_never_the_transcript() -> None:
    attempts: list[int] = []

    def flaky() -> Any:
        attempts.append(1)
        if len(attempts) == 1:
            return {"status": "error", "error": "connection reset " + "x" * 300}
        return "fetched"

    probe = _tool("probe", lambda: "P" * 500)
    fetch = _tool("fetch", flaky)
    script = [
        _tool_turn("probe", "call_a"),
        _tool_turn("fetch", "call_b"),
        _tool_turn("fetch", "call_c"),
        {"text": "I will build on call_a's output", **_tool_turn("probe", "call_d")},
        "done",
    ]
    provider = MockProvider(script)
    result = agent_loop(
        "t",
        provider=provider,
        tools=[probe, fetch],
        loop_until_done=True,
        max_nudges=2,
        transcript_projection=[
            "squash_failed_calls",
            {"policy": "reachability_gc", "keep_recent": 2},
            {"policy": "summary_prefix", "text": "earlier: nothing"},
        ],
    )
    last = provider.requests[-1].messages
    bodies = {m.get("tool_call_id"): str(m["content"]) for m in last if m["role"] == "tool"}
    assert bodies["call_b"].startswith("[tool result call_b elided")  # squashed, then GC'd
    squashed = squash_failed_calls(result.transcript["messages"])
    by_id = {m.get("tool_call_id"): str(m["content"]) for m in squashed}
    assert by_id["call_b"].startswith("[failed attempt, later retried successfully]")
    assert by_id["call_c"] == "fetched"
    assert bodies["call_a"] == "P" * 500  # referenced later by the assistant: reachable
    assert bodies["call_c"].startswith("[tool result call_c elided")
    assert last[0]["content"].startswith("<summary>")
    # the recorded transcript is untouched
    recorded = {m.get("tool_call_id"): m["content"] for m in result.transcript["messages"]}
    assert recorded["call_c"] == "fetched" and "connection reset" in recorded["call_b"]


def test_clean_tool_repair_fixes_a_broken_history() -> None:
    history = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "x"}]},
        {"role": "tool", "tool_call_id": "zz", "content": "orphan"},
        {"role": "user", "content": "next"},
    ]
    provider = MockProvider(["ok"])
    agent_loop("go", provider=provider, messages=history, transcript_projection="clean_tool_repair")
    sent = provider.requests[0].messages
    _assert_paired(sent)
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user", "user"]
    assert sent[2]["content"] == "[no result recorded]"
    with pytest.raises(AgentOptionError, match="unknown policy"):
        agent_loop("x", transcript_projection="nope")
    custom = MockProvider(["ok"])
    agent_loop("go", provider=custom, transcript_projection=lambda ms, ctx: ms[-1:])
    assert [m["content"] for m in custom.requests[0].messages] == ["go"]


def test_an_unknown_window_is_learnt_from_ollama() -> None:
    pytest.importorskip("openai")
    from charter.agent import get_provider

    from .fakeserver import fake_server
    from .replies import chat

    show = {
        "path": "/api/show",
        "json": {
            "model_info": {"general.architecture": "qwen3", "qwen3.context_length": 40960},
            "parameters": "num_ctx 2048\nstop <|im_end|>",
        },
    }
    pad = [{"role": "user", "content": "pad " * 4000}]  # ~4000 tokens: above 80% of 2048
    with fake_server([show, chat("summary"), chat("done")]) as srv:
        provider = get_provider("ollama", base_url=srv.url + "/v1")
        result = agent_loop(
            "x", provider=provider, model="qwen3:8b", messages=pad, compact_keep_last=1
        )
    assert srv.other_requests[0]["path"] == "/api/show"
    assert srv.other_requests[0]["json"] == {"model": "qwen3:8b"}
    learnt = [e for e in result.trace["events"] if e["type"] == "context_window_learned"]
    assert learnt and learnt[0]["tokens"] == 2048  # num_ctx, what the model is served with
    compacted = [e for e in result.trace["events"] if e["type"] == "TranscriptCompacted"]
    assert compacted  # the long prompt was compacted before it went out
    sent = srv.requests[-1]["json"]["messages"]
    assert sum(len(str(m.get("content"))) for m in sent) < 16_000


def test_an_unknown_window_with_a_long_prompt_fails_loudly() -> None:
    pytest.importorskip("openai")
    from charter.agent import get_provider

    from .fakeserver import fake_server
    from .replies import chat

    pad = [{"role": "user", "content": "pad " * 60_000}]  # a 240k-character prompt
    with fake_server([chat("never")]) as srv:
        provider = get_provider("openai", base_url=srv.url + "/v1", api_key="k")
        with pytest.raises(AgentOptionError, match="compact_threshold") as caught:
            agent_loop("x", provider=provider, model="my-finetune", messages=pad)
    assert "my-finetune" in str(caught.value)
    assert srv.requests == []  # nothing was sent
    # the allowed twin: a short prompt to the same unknown model goes out
    with fake_server([chat("ok")]) as srv:
        provider = get_provider("openai", base_url=srv.url + "/v1", api_key="k")
        assert agent_loop("x", provider=provider, model="my-finetune").status == "done"
