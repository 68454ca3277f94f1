"""A run's agent transcript is kept in the log, bounded (issue 17, run detail)."""

from __future__ import annotations

import json

from charter.run.transcripts import MAX_MESSAGES, MAX_TEXT, entry


def test_long_conversations_are_bounded_and_say_so() -> None:
    messages = [{"role": "user", "content": "first"}]
    messages += [{"role": "assistant", "content": f"turn {i}"} for i in range(500)]
    messages.append({"role": "tool", "content": "x" * (MAX_TEXT * 3), "tool_call_id": "t1"})
    kept = entry({"session_id": "s", "system": "sys", "messages": messages}, status="done",
                 model="m")  # fmt: skip
    assert len(kept["messages"]) == MAX_MESSAGES
    assert kept["messages"][0]["content"] == "first"  # the task is never dropped
    assert kept["messages"][-1]["tool_call_id"] == "t1"  # nor the latest turns
    assert kept["dropped_messages"] == len(messages) - MAX_MESSAGES
    assert kept["truncated"] is True
    assert kept["messages"][-1]["content"].endswith(f"[{MAX_TEXT * 2} more characters]")
    assert len(json.dumps(kept)) < MAX_MESSAGES * 200 + MAX_TEXT * 2


def test_a_short_conversation_is_kept_whole() -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    kept = entry({"session_id": "s", "system": "", "messages": messages}, status="done",
                 model=None)  # fmt: skip
    assert kept["messages"] == messages and kept["truncated"] is False
