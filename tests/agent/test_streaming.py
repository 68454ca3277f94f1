"""agent_stream: typed events while the loop runs, fed by the providers' streaming APIs,
and the same result at the end as agent_loop."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from charter.agent import (
    FinalResult,
    LoopEvent,
    MockProvider,
    PermissionDenied,
    ReasoningDelta,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    agent_loop,
    agent_stream,
)

from .conftest import Recorder, tc
from .fakeserver import fake_server
from .replies import ROUTES, anthropic_sse, provider_for, reply, reply_sse


def _collect(prompt: str, **options: Any) -> list[Any]:
    async def run() -> list[Any]:
        return [event async for event in agent_stream(prompt, **options)]

    return asyncio.run(run())


def test_events_in_order_and_the_same_result_as_agent_loop(rec: Recorder) -> None:
    script = [tc("look"), tc("secret"), "all done"]
    tools = [rec.tool("look"), rec.tool("secret")]
    policy = {"tools": {"deny": ["secret"]}}
    events = _collect("x", provider=MockProvider(list(script)), tools=tools, policy=policy)
    kinds = [type(e).__name__ for e in events if not isinstance(e, LoopEvent)]
    assert kinds == [
        "ToolCallStarted",
        "ToolCallFinished",
        "ToolCallStarted",
        "PermissionDenied",
        "ToolCallFinished",
        "TextDelta",
        "FinalResult",
    ]
    denied = next(e for e in events if isinstance(e, PermissionDenied))
    assert denied.name == "secret" and denied.decision is not None
    assert denied.decision["decision"] == "deny"
    assert rec.names() == ["look"]  # the effect: the denied handler never ran
    final = events[-1]
    assert isinstance(final, FinalResult)
    twin = agent_loop("x", provider=MockProvider(list(script)), tools=tools, policy=policy)
    assert final.result.status == twin.status and final.result.visible_text == twin.visible_text
    assert final.result.tools.to_dict() == twin.tools.to_dict()
    assert all(e.session_id == final.session_id for e in events)


def test_approvals_arrive_as_loop_events(rec: Recorder) -> None:
    events = _collect(
        "x",
        provider=MockProvider([tc("push"), "done"]),
        tools=[rec.tool("push")],
        approval_policy={
            "rules": [{"name": "ask", "decision": "ask", "match": {"tools": ["push"]}}]
        },
        on_escalation=lambda request: {"grant": "once"},
    )
    loop_kinds = [e.kind for e in events if isinstance(e, LoopEvent)]
    assert loop_kinds[:2] == ["PermissionEscalation", "PermissionGrant"]
    assert rec.names() == ["push"]


def test_a_consumer_that_stops_stops_the_loop(rec: Recorder) -> None:
    provider = MockProvider([tc("look")] * 20 + ["done"])

    async def run() -> None:
        stream = agent_stream("x", provider=provider, tools=[rec.tool("look")])
        async with contextlib.aclosing(stream) as events:
            async for event in events:
                if isinstance(event, ToolCallFinished):
                    break
        await asyncio.sleep(0.05)

    asyncio.run(run())
    assert len(provider.requests) <= 3 and len(rec.names()) <= 3  # not the 21 scripted


@pytest.mark.parametrize("route", ROUTES)
def test_providers_stream_deltas_and_end_like_agent_loop(route: str, rec: Recorder) -> None:
    pytest.importorskip("openai")
    pytest.importorskip("anthropic")
    streamed = [reply_sse(route, [], [("c1", "look", {})]), reply_sse(route, ["Hel", "lo ", "you"])]
    with fake_server(streamed) as srv:
        events = _collect(
            "x", provider=provider_for(route, srv.url), model="m", tools=[rec.tool("look")]
        )
    assert srv.rejected == []
    assert all(r["json"].get("stream") is True for r in srv.requests)  # the streaming API
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert deltas == ["Hel", "lo ", "you"]  # as the server sent them, one event each
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    assert [s.name for s in started] == ["look"]
    final = events[-1]
    assert isinstance(final, FinalResult)
    with fake_server([reply(route, None, [("c1", "look", {})]), reply(route, "Hello you")]) as srv2:
        twin = agent_loop(
            "x", provider=provider_for(route, srv2.url), model="m", tools=[rec.tool("look")]
        )
    assert final.result.visible_text == twin.visible_text == "Hello you"
    assert (
        final.result.status == twin.status and final.result.tools.to_dict() == twin.tools.to_dict()
    )


def test_anthropic_thinking_streams_as_reasoning_deltas() -> None:
    pytest.importorskip("anthropic")
    with fake_server([anthropic_sse(["ok"], thinking="let me think")]) as srv:
        events = _collect("x", provider=provider_for("anthropic", srv.url))
    assert [e.text for e in events if isinstance(e, ReasoningDelta)] == ["let me think"]
    final = events[-1]
    assert isinstance(final, FinalResult) and final.result.visible_text == "ok"
