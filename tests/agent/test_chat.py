"""agent_chat_loop: one session across operator turns, wait_for_user, routes, closing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from charter.agent import (
    AgentOptionError,
    MockProvider,
    agent_chat_loop,
    agent_chat_route_input,
    scripted_user,
)
from charter.agent.sessions import SessionStore

from .conftest import tc


def test_chat_keeps_one_session_and_returns_on_wait_for_user(_session_dir: Path) -> None:
    lines = iter(["/runs", "review the parser", "yes, go ahead", "/exit"])
    provider = MockProvider(
        [
            {"text": "Shall I refactor it?", **tc("wait_for_user", reason="confirm")},
            "Refactored the parser.",
        ]
    )
    seen: list[str] = []

    def on_input(state: dict[str, Any]) -> dict[str, Any]:
        return agent_chat_route_input(
            next(lines), state, {"/runs": lambda req: {"kind": "handled", "message": "no runs"}}
        )

    def on_turn(turn: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        seen.append(turn["stop_reason"])
        return {"state": {**state, "last_text": turn["visible_text"]}}

    out = agent_chat_loop(
        {
            "session_id": "review-chat",
            "provider": provider,
            "loop_until_done": True,
            "on_user_input": on_input,
            "on_model_turn": on_turn,
        }
    )
    assert out["reason"] == "user_exit" and out["turns"] == 2 and out["handled"] == ["no runs"]
    assert seen == ["wait_for_user", "natural"]
    assert out["state"]["last_text"] == "Refactored the parser."
    # the second turn saw the first one: one session across operator turns
    second = [str(m.get("content")) for m in provider.requests[1].messages]
    assert second[0] == "review the parser" and second[-1] == "yes, go ahead"
    assert SessionStore(_session_dir).load("review-chat").closed == "user_exit"


def test_chat_driven_by_a_scripted_user_and_options(_session_dir: Path) -> None:
    user = scripted_user([{"match": "*", "reply": "hello there"}], {"max_replies": 1})
    replies = iter([user.answer("start")])

    def on_input(state: dict[str, Any]) -> dict[str, Any]:
        decision = next(replies, {"action": "stop"})
        if decision["action"] != "reply":
            return {"kind": "exit", "reason": "simulated_user_stop"}
        return {"kind": "message", "text": decision["reply"]}

    out = agent_chat_loop(
        {
            "provider": MockProvider(["hi!"]),
            "on_user_input": on_input,
            "close_session": False,
            "wait_for_user_tool": False,
        }
    )
    assert out["status"] == "open" and out["turns"] == 1
    assert SessionStore(_session_dir).load(out["session_id"]).closed is None
    with pytest.raises(AgentOptionError, match="on_user_input"):
        agent_chat_loop({"provider": MockProvider(["x"])})
    with pytest.raises(AgentOptionError, match="kind"):
        agent_chat_loop({"provider": MockProvider(["x"]), "on_user_input": lambda s: "hi"})
    routed = agent_chat_route_input("/nope", {}, {})
    assert routed["kind"] == "handled" and "unknown command" in routed["message"]
