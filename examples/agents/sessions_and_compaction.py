"""A long conversation that survives the process and stays under its context budget.

Two loops share one session (the second could be another process); compaction keeps
the prompt under compact_threshold and preserves the failing test verbatim.
Run: python examples/agents/sessions_and_compaction.py
"""

from __future__ import annotations

import os
import tempfile

from _provider import choose

from charter.agent import (
    agent_loop,
    agent_session_messages,
    agent_session_queue_message,
    make_tool,
)
from charter.agent.compaction import compact_preserving_test_failures

os.environ.setdefault("CHARTER_SESSION_DIR", tempfile.mkdtemp())


def run_tests(n: int) -> str:
    if n == 3:
        return "FAILED tests/test_parser.py::test_unicode - AssertionError: 'é' != 'e'"
    return f"run {n}: " + "ok " * 80


tool = make_tool(run_tests, annotations={"side_effect_level": "read_only"})
turns = [{"tool_calls": [{"name": "run_tests", "arguments": {"n": i}}]} for i in range(30)]
provider, model = choose([*turns, "Found the unicode failure."])
first = agent_loop(
    "Run the tests until you find the failure.",
    provider=provider,
    model=model,
    tools=[tool],
    loop_until_done=True,
    max_iterations=40,
    session_id="parser-fix",
    compact_threshold=1500,
    compaction_policy=compact_preserving_test_failures(),
)
compactions = [e for e in first.trace["events"] if e["type"] == "TranscriptCompacted"]
print("compactions:", len(compactions) > 0)
print("largest prompt under budget:", max(e["estimated_tokens_after"] for e in compactions) <= 1500)

agent_session_queue_message("parser-fix", "Also mention which file to change.")
provider, model = choose(["Change src/parser.py: normalise before comparing."])
second = agent_loop("Summarise.", provider=provider, model=model, session_id="parser-fix")
seen = " ".join(str(m.get("content")) for m in agent_session_messages("parser-fix"))
print("failure kept:", "test_unicode" in seen)
print("queued message delivered:", "which file to change" in seen)
