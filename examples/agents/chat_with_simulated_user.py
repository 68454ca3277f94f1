"""An operator chat driven by a scripted (simulated) user, for evals.

The agent asks a clarification question through wait_for_user; the simulated user
answers from its script; the chat keeps one session and closes it when the user stops.
Run: python examples/agents/chat_with_simulated_user.py
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from _provider import choose

from charter.agent import agent_chat_loop, scripted_user

os.environ.setdefault("CHARTER_SESSION_DIR", tempfile.mkdtemp())
user = scripted_user(
    [
        {"match": "start", "reply": "Add tests for the parser."},
        {"match": "*test runner*", "reply": "Use pytest; cover empty and unicode input."},
        {"match": "*", "action": "stop", "reason": "complete"},
    ],
    {"max_replies": 3},
)
provider, model = choose(
    [
        {
            "text": "Which test runner should I use?",
            "tool_calls": [{"name": "wait_for_user", "arguments": {"reason": "test runner?"}}],
        },
        "Wrote tests/test_parser.py with pytest: empty and unicode cases.",
    ]
)
question = ["start"]


def on_input(state: dict[str, Any]) -> dict[str, Any]:
    decision = user.answer(question[-1])
    if decision["action"] != "reply":
        return {"kind": "exit", "reason": f"simulated_user_{decision['action']}"}
    return {"kind": "message", "text": decision["reply"]}


def on_turn(turn: dict[str, Any], state: dict[str, Any]) -> None:
    question.append(turn["visible_text"])


out = agent_chat_loop(
    {
        "provider": provider,
        "model": model,
        "loop_until_done": True,
        "on_user_input": on_input,
        "on_model_turn": on_turn,
    }
)
print("turns:", out["turns"], "closed:", out["reason"])
print("user audit:", [a["event_type"] for a in user.audit])
