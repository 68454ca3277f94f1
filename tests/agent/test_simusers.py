"""Simulated users: scripted and agentic answerers, as a tool and as a post-turn callback."""

from __future__ import annotations

from typing import Any

import pytest

from charter.agent import AgentOptionError, MockProvider, agent_loop
from charter.agent.simusers import (
    agentic_user,
    fixture_user,
    scripted_user,
    simulated_user_post_turn,
    user_tools,
)

from .conftest import tc


def _audits(result: Any) -> list[str]:
    return [
        e["audit"]["event_type"]
        for e in result.trace["events"]
        if e["type"] == "tool_call_audit" and e.get("audit")
    ]


def test_scripted_user_answers_through_ask_user() -> None:
    answerer = scripted_user(
        [
            {"match": "*test runner*", "reply": "Use pytest; cover empty and boundary inputs."},
            {"match": "*done*", "action": "stop", "reason": "complete"},
        ],
        {"max_replies": 2},
    )
    provider = MockProvider(
        [
            tc("ask_user", question="Which test runner should I use?"),
            tc("ask_user", question="Am I done?"),
            "Wrote the tests.",
        ]
    )
    result = agent_loop(
        "Write tests.", provider=provider, tools=user_tools(answerer), loop_until_done=True
    )
    assert result.status == "done"
    tool_msgs = [m["content"] for m in result.transcript["messages"] if m["role"] == "tool"]
    assert "Use pytest" in tool_msgs[0] and "nothing to add" in tool_msgs[1]
    assert _audits(result) == ["simulated_user_reply", "simulated_user_stop"]


def test_max_replies_is_a_budget() -> None:
    answerer = fixture_user(["a", "b", "c"], {"max_replies": 1})
    assert answerer.answer("q1?") == {"action": "reply", "reply": "a"}
    assert answerer.answer("q2?")["action"] == "budget_exhausted"
    assert [a["event_type"] for a in answerer.audit] == [
        "simulated_user_reply",
        "simulated_user_budget_exhausted",
    ]


def test_post_turn_reply_continues_and_silence_stops() -> None:
    answerer = scripted_user(["Vitest, please."])
    provider = MockProvider(["Which test runner do you want?", "Should I add CI too?", "x"])
    result = agent_loop(
        "Create tests.",
        provider=provider,
        post_turn_callback=simulated_user_post_turn(answerer),
        loop_until_done=True,
    )
    assert provider.requests[1].messages[-1]["content"] == "Vitest, please."
    assert result.status == "done" and result.stop_reason == "simulated_user_stop"
    assert len(provider.requests) == 2


def test_agentic_user_asks_another_model() -> None:
    user_model = MockProvider(["Use pytest.", "STOP"])
    answerer = agentic_user("Get tests written", "Be brief.", [], user_model, {"max_llm_calls": 4})
    provider = MockProvider(
        [tc("ask_user", question="Runner?"), tc("ask_user", question="Anything else?"), "done"]
    )
    result = agent_loop("x", provider=provider, tools=user_tools(answerer), loop_until_done=True)
    assert _audits(result) == ["simulated_user_reply", "simulated_user_stop"]
    assert "Get tests written" in str(user_model.requests[0].system)
    assert answerer.llm_calls == 2


def test_bad_scripts_name_the_entry() -> None:
    with pytest.raises(AgentOptionError) as err:
        scripted_user([{"match": "*", "action": "explode"}])
    assert err.value.option == "script[0].action"
    with pytest.raises(AgentOptionError) as err:
        scripted_user(["ok", {"replly": "typo"}])
    assert err.value.option == "script[1].replly"
