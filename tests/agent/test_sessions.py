"""Sessions that survive the process: continuation, crashes, deferred messages, seeding,
the scratchpad."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from charter.agent import (
    AgentOptionError,
    MockProvider,
    agent_loop,
    agent_session_clear_scratchpad,
    agent_session_messages,
    agent_session_queue_message,
    agent_session_scratchpad,
    agent_session_seed_from_jsonl,
    agent_session_set_scratchpad,
    make_tool,
)
from charter.agent.sessions import SessionError, SessionStore

from .conftest import tc


def _contents(request: Any) -> list[str]:
    return [str(m.get("content")) for m in request.messages]


def _child(code: str, store: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CHARTER_SESSION_DIR": str(store)}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_a_session_continues_in_another_process(_session_dir: Path) -> None:
    out = _child(
        """
        from charter.agent import agent_loop, MockProvider
        r = agent_loop("remember the word PELICAN", provider=MockProvider(["noted"]),
                       session_id="s-cross")
        assert r.status == "done"
        """,
        _session_dir,
    )
    assert out.returncode == 0, out.stderr
    provider = MockProvider(["it was PELICAN"])
    result = agent_loop("what was the word?", provider=provider, session_id="s-cross")
    seen = _contents(provider.requests[0])
    assert seen == ["remember the word PELICAN", "noted", "what was the word?"]
    assert result.transcript["session_id"] == "s-cross"
    # and back: a third process sees all four messages
    out = _child(
        """
        from charter.agent import agent_session_messages
        print(len(agent_session_messages("s-cross")))
        """,
        _session_dir,
    )
    assert out.stdout.strip() == "4", out.stderr


def test_a_killed_loop_keeps_every_finished_turn(_session_dir: Path) -> None:
    out = _child(
        """
        import os
        from charter.agent import agent_loop, MockProvider, make_tool
        n = []
        def step(i: int) -> str:
            n.append(i)
            if len(n) == 3:
                os._exit(9)  # a crash in the middle of turn 3's tool call
            return f"step {i} ok"
        tool = make_tool(step, name="step", annotations={"side_effect_level": "read_only"})
        turns = [{"tool_calls": [{"name": "step", "arguments": {"i": i}}]} for i in range(5)]
        agent_loop("work", provider=MockProvider(turns), tools=[tool], session_id="s-crash")
        """,
        _session_dir,
    )
    assert out.returncode == 9
    messages = SessionStore(_session_dir).load("s-crash").messages
    # prompt + 2 finished turns (assistant call + tool result each); turn 3 is lost, nothing torn
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "tool"]
    assert messages[-1]["content"] == "step 1 ok"
    provider = MockProvider(["resumed"])
    agent_loop("continue", provider=provider, session_id="s-crash")
    assert _contents(provider.requests[0])[-2:] == ["step 1 ok", "continue"]


def test_deferred_messages_join_at_the_next_turn_boundary(_session_dir: Path) -> None:
    agent_session_queue_message("s-defer", "before start: use tabs")
    queued: list[str] = []

    def work() -> str:
        # another process queues a message while the loop is inside a tool call
        out = _child(
            """
            from charter.agent import agent_session_queue_message
            agent_session_queue_message("s-defer", "mid-run: also update the README")
            """,
            _session_dir,
        )
        assert out.returncode == 0, out.stderr
        queued.append("x")
        return "worked"

    tool = make_tool(work, name="work", annotations={"side_effect_level": "read_only"})
    provider = MockProvider([tc("work"), "finished"])
    result = agent_loop("start", provider=provider, tools=[tool], session_id="s-defer")
    first, second = (_contents(r) for r in provider.requests)
    assert first == ["before start: use tabs", "start"]
    assert "mid-run: also update the README" not in first
    assert second[-1] == "mid-run: also update the README"
    injected = [e for e in result.trace["events"] if e["type"] == "deferred_user_message_injected"]
    assert [e["iteration"] for e in injected] == [0, 2]
    assert result.deferred_user_messages == []
    # queued after the last turn: returned, and delivered first by the next loop
    late = agent_session_queue_message("s-defer", "after the end: thanks")
    provider2 = MockProvider(["ok"])
    agent_loop("next", provider=provider2, session_id="s-defer")
    assert "after the end: thanks" in _contents(provider2.requests[0])
    assert late.startswith("msg_")


def test_a_message_queued_during_the_last_turn_is_returned(_session_dir: Path) -> None:
    def finalize(request: Any) -> Any:
        agent_session_queue_message("s-late", "too late for this loop")
        return "all done"

    result = agent_loop("go", provider=MockProvider([finalize]), session_id="s-late")
    assert [m["content"] for m in result.deferred_user_messages] == ["too late for this loop"]


def test_seed_from_a_transcript_sidecar(tmp_path: Path, _session_dir: Path) -> None:
    sidecar = tmp_path / "sidecar"
    echo = make_tool(lambda: "E", name="echo", annotations={"side_effect_level": "read_only"})
    agent_loop(
        "first task",
        provider=MockProvider([tc("echo"), "answer one"]),
        tools=[echo],
        llm_transcript_dir=str(sidecar),
    )
    sid = agent_session_seed_from_jsonl(sidecar, session_id="seeded", provider="mock")
    assert [m["role"] for m in agent_session_messages(sid)] == ["user", "assistant", "tool"]
    provider = MockProvider(["ok"])
    agent_loop("follow-up", provider=provider, session_id=sid)
    assert _contents(provider.requests[0])[0] == "first task"
    short = agent_session_seed_from_jsonl(sidecar, drop_tool_calls=True)
    assert [m["role"] for m in agent_session_messages(short)] == ["user", "assistant"]
    last = agent_session_seed_from_jsonl(sidecar, truncate_to_last=1)
    assert agent_session_messages(last) == []  # the last message was a tool result: cut
    with pytest.raises(SessionError, match="recorded provider mock, expected openai"):
        agent_session_seed_from_jsonl(sidecar, provider="openai")
    with pytest.raises(SessionError, match="already exists"):
        agent_session_seed_from_jsonl(sidecar, session_id="seeded")
    only = tmp_path / "responses.jsonl"
    only.write_text(json.dumps({"type": "response", "text": "hi", "provider": "mock"}) + "\n")
    with pytest.raises(SessionError, match="validate=False"):
        agent_session_seed_from_jsonl(only)
    loose = agent_session_seed_from_jsonl(only, validate=False)
    assert agent_session_messages(loose) == [{"role": "assistant", "content": "hi"}]


def test_scratchpad_functions_and_cap(_session_dir: Path) -> None:
    assert agent_session_scratchpad("pad") is None
    v1 = agent_session_set_scratchpad("pad", {"goals": ["ship"], "facts": [], "refs": []})
    assert agent_session_scratchpad("pad") == {"goals": ["ship"], "facts": [], "refs": []}
    v2 = agent_session_clear_scratchpad("pad")
    assert (v1, v2) == (1, 2) and agent_session_scratchpad("pad") is None
    with pytest.raises(SessionError, match="16384"):
        agent_session_set_scratchpad("pad", {"facts": ["x" * 20000]})


def test_scratchpad_is_recited_and_reorganized_with_cited_refs(_session_dir: Path) -> None:
    probe = make_tool(
        lambda: "disk is 91% full", name="probe", annotations={"side_effect_level": "read_only"}
    )
    turns = [
        {"tool_calls": [{"name": "probe", "arguments": {}, "id": "call_probe"}]},
        tc("probe"),
        "done",
    ]
    reorg = MockProvider(
        aux_turns=[
            json.dumps(
                {
                    "goals": ["free disk"],
                    "open_items": [],
                    "facts": [
                        {"text": "disk 91% full", "refs": ["call_probe"]},
                        {"text": "invented", "refs": ["call_nowhere"]},
                    ],
                    "refs": ["call_probe"],
                }
            )
        ]
    )
    provider = MockProvider(turns)
    result = agent_loop(
        "check the disk",
        provider=provider,
        tools=[probe],
        session_id="s-pad",
        scratchpad={"reorganize_every": 2, "reorganizer": {"provider": reorg}},
    )
    assert "<scratchpad" in (provider.requests[0].system or "")
    assert "disk 91% full" in (provider.requests[2].system or "")  # recited after iteration 2
    pad = result.transcript["scratchpad"]
    assert pad["facts"] == [{"text": "disk 91% full", "refs": ["call_probe"]}]
    events = [e for e in result.trace["events"] if e["type"] == "agent_scratchpad"]
    assert [e["action"] for e in events] == ["init", "reorganize"] and events[1][
        "dropped_facts"
    ] == 1
    assert result.transcript["metadata"]["agent_scratchpad"]["version"] == 2
    # it lives in the session: the next loop starts from it
    assert agent_session_scratchpad("s-pad") == pad
    nxt = MockProvider(["ok"])
    agent_loop("again", provider=nxt, session_id="s-pad", scratchpad={"reorganize_every": 0})
    assert "disk 91% full" in (nxt.requests[0].system or "")


def test_bad_session_input_is_a_clear_error(_session_dir: Path) -> None:
    with pytest.raises(AgentOptionError, match=r"session id '\.\./x'"):
        agent_loop("x", session_id="../x")
    (_session_dir / "broken.jsonl").write_text('{"type": "message", "message": {}}\nnot json\n')
    with pytest.raises(AgentOptionError, match=r"broken\.jsonl:2: not a JSON record"):
        agent_loop("x", session_id="broken")
    with pytest.raises(AgentOptionError, match=r"session_store.*needs session_id"):
        agent_loop("x", session_store=str(_session_dir))
    with pytest.raises(AgentOptionError, match="scratchpad"):
        agent_loop("x", scratchpad={"bogus": 1})


def test_session_store_false_keeps_the_conversation_in_memory(_session_dir: Path) -> None:
    agent_loop("one", provider=MockProvider(["a"]), session_id="mem", session_store=False)
    provider = MockProvider(["b"])
    agent_loop("two", provider=provider, session_id="mem", session_store=False)
    assert _contents(provider.requests[0]) == ["one", "a", "two"]
    assert not (_session_dir / "mem.jsonl").exists()
