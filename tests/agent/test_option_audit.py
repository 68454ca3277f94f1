"""No agent_loop option is accepted and ignored.

Every key of ``KNOWN_OPTIONS`` has a probe here: a run with the option (``opts``) and a
twin run without it (``base``) whose only difference is that option; ``check`` must hold
for the first and fail for the second. A new option without a probe fails the first test.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from charter.agent import MockProvider, agent_loop, make_tool, skill_define, skill_registry
from charter.agent.audit import AuditSinkHook
from charter.agent.compaction import compaction_policy
from charter.agent.hooks import LoopHook
from charter.agent.options import KNOWN_OPTIONS

from .conftest import tc
from .wire import WireMock

SERVER = str(Path(__file__).parent / "servers" / "tiny_mcp.py")
SCRIPT: list[Any] = [tc("look"), "final answer"]


def _look() -> Any:
    return make_tool(lambda: "seen", name="look", annotations={"side_effect_level": "read_only"})


def _flaky() -> list[Any]:
    state = {"n": 0}

    def flaky() -> Any:
        state["n"] += 1
        return {"status": "error", "error": "boom"} if state["n"] == 1 else "fine"

    return [make_tool(flaky, name="flaky", annotations={"side_effect_level": "read_only"})]


def _reader() -> list[Any]:
    return [
        make_tool(
            lambda path: "read " + path,
            name="peek",
            annotations={"side_effect_level": "read_only", "kind": "read", "path_args": ["path"]},
        )
    ]


def _threads() -> tuple[list[Any], list[str]]:
    seen: list[str] = []

    def slow() -> str:
        seen.append(threading.current_thread().name)
        return "ok"

    return [make_tool(slow, name="slow", annotations={"side_effect_level": "read_only"})], seen


WS = Path(tempfile.mkdtemp(prefix="audit-ws-"))
OUTSIDE = Path(tempfile.mkdtemp(prefix="audit-out-"))
(OUTSIDE / "o.txt").write_text("outside")
ASK_ALL = {"rules": [{"name": "all", "decision": "ask", "match": {"tools": ["*"]}}]}
SKILLS = skill_registry(
    skill_define("pyfix", description="fix python code", prompt="SKILL-PROMPT", paths=["*.py"])
)
SCHEMA = {"type": "object", "required": ["a"]}
RESUME = WS / "resume"
RESUME.mkdir()
(RESUME / "snapshot.json").write_text(
    '{"version": 1, "messages": [{"role": "user", "content": "FROM-SNAPSHOT"}]}'
)


@dataclass
class Probe:
    opts: dict[str, Any]
    check: Callable[[Any, MockProvider], bool]
    base: dict[str, Any] = field(default_factory=dict)
    script: list[Any] = field(default_factory=lambda: list(SCRIPT))
    tools: Callable[[], list[Any]] | None = None


def _turns(p: MockProvider) -> list[Any]:
    """The conversation's requests (not judge, summariser or scratchpad calls)."""
    return [r for r in p.requests if r.purpose == "turn"]


def _sys0(p: MockProvider) -> str:
    return _turns(p)[0].system or ""


def _all_text(p: MockProvider) -> str:
    return " ".join(str(m.get("content")) for r in p.requests for m in r.messages)


def _events(r: Any, kind: str) -> list[dict[str, Any]]:
    return [e for e in r.trace["events"] if e["type"] == kind]


def _tool_names(p: MockProvider, i: int = 0) -> list[str]:
    return [t["name"] for t in p.requests[i].tools]


_THREAD_TOOLS, _THREADS = _threads()
_NUDGE_SCRIPT = [tc("look"), "final answer", "final answer", "##DONE##"]
_PAD = [{"role": "user", "content": "pad " * 500}]
_COMPACT = {"compact_threshold": 300, "compact_keep_last": 0, "messages": _PAD}
_IDLE_COMPACT = {
    "daemon": True,
    "compact_threshold": 10**6,
    "compact_keep_last": 0,
    "messages": _PAD,
}


def _gpt5() -> dict[str, Any]:
    return {"provider": WireMock(SCRIPT, cycle=True), "model": "gpt-5"}


def _claude() -> dict[str, Any]:
    return {
        "provider": WireMock(SCRIPT, route="anthropic", cycle=True),
        "model": "claude-sonnet-4-6",
    }


class _SeenAt(AuditSinkHook):
    """An audit sink noting how many model requests had gone out when it was written."""

    def __init__(self) -> None:
        super().__init__(self.record)
        self.seen: list[int] = []
        self.provider: Any = None

    async def on_start(self, run: Any, stack: Any) -> None:
        self.provider = run.provider
        self.background = False  # each run decides again (the probe reuses this hook)
        await super().on_start(run, stack)

    def record(self, entry: dict[str, Any]) -> None:
        self.seen.append(len(self.provider.requests))


_SEEN_AT = _SeenAt()


class _Tagger(LoopHook):
    async def before_model_call(self, run: Any, iteration: int) -> None:
        run.system_tail["tagger"] = "HOOKED"


def _beta(p: Any) -> str:
    return str(p.bodies[0].get("extra_headers", {}).get("anthropic-beta", ""))


PROBES: dict[str, Probe] = {
    "provider": Probe({"provider": MockProvider(["other"])}, lambda r, p: r.text == "other"),
    "model": Probe({"model": "m1"}, lambda r, p: p.requests[0].model == "m1"),
    "profile": Probe({"profile": "completer"}, lambda r, p: r.status == "budget_exhausted"),
    "loop_until_done": Probe({"loop_until_done": True}, lambda r, p: "IMPORTANT" in _sys0(p)),
    "done_sentinel": Probe(
        {"loop_until_done": True, "done_sentinel": "ZZZ"},
        lambda r, p: "ZZZ" in _sys0(p),
        base={"loop_until_done": True},
    ),
    "max_iterations": Probe({"max_iterations": 1}, lambda r, p: r.status == "budget_exhausted"),
    "iteration_budget": Probe(
        {"iteration_budget": {"mode": "fixed", "initial": 1, "max": 1}},
        lambda r, p: r.status == "budget_exhausted",
    ),
    "loop_control": Probe(
        {"loop_control": lambda s: {"action": "stop", "reason": "halt"}},
        lambda r, p: r.stop_reason == "halt",
    ),
    "max_nudges": Probe(
        {"loop_until_done": True, "done_sentinel": "##DONE##", "max_nudges": 0},
        lambda r, p: r.status == "stuck",
        base={"loop_until_done": True, "done_sentinel": "##DONE##"},
        script=_NUDGE_SCRIPT,
    ),
    "nudge": Probe(
        {"loop_until_done": True, "done_sentinel": "##DONE##", "nudge": "PUSH-ON"},
        lambda r, p: "PUSH-ON" in _all_text(p),
        base={"loop_until_done": True, "done_sentinel": "##DONE##"},
        script=_NUDGE_SCRIPT,
    ),
    "tool_format": Probe({"tool_format": "text"}, lambda r, p: p.requests[0].tools == []),
    "native_tool_fallback": Probe(
        {"native_tool_fallback": "reject"},
        lambda r, p: r.status == "provider_error",
        script=['<tool_call>{"name": "look", "arguments": {}}</tool_call>', "final"],
    ),
    "tools": Probe({"tools": []}, lambda r, p: "look" in r.tools.rejected),
    "tool_retries": Probe(
        {"tool_retries": 1, "tool_backoff_ms": 0},
        lambda r, p: "flaky" in r.tools.successful,
        base={"tool_backoff_ms": 0},
        script=[tc("flaky"), "final"],
        tools=_flaky,
    ),
    "tool_backoff_ms": Probe(
        {"tool_retries": 1, "tool_backoff_ms": 0},
        lambda r, p: r.llm.duration_ms < 500,
        base={"tool_retries": 1},
        script=[tc("flaky"), "final"],
        tools=_flaky,
    ),
    "max_concurrent_tools": Probe(
        {"max_concurrent_tools": 2},
        lambda r, p: any(name != "MainThread" for name in _THREADS[-2:]),
        script=[{"tool_calls": [{"name": "slow", "arguments": {}}] * 2}, "final"],
        tools=lambda: _THREAD_TOOLS,
    ),
    "policy": Probe(
        {"policy": {"tools": {"deny": ["look"]}}}, lambda r, p: "look" in r.tools.rejected
    ),
    "policy_label": Probe(
        {"policy": {"tools": {"deny": ["look"]}}, "policy_label": "LBL"},
        lambda r, p: '"frame": "LBL"' in _all_text(p),
        base={"policy": {"tools": {"deny": ["look"]}}},
    ),
    "scope": Probe({"scope": {"tools": ["other"]}}, lambda r, p: "look" in r.tools.rejected),
    "tool_caller": Probe(
        {"tool_caller": lambda inner: lambda call: "intercepted"},
        lambda r, p: "intercepted" in _all_text(p),
    ),
    "workspace": Probe(
        {"workspace": str(OUTSIDE)},
        lambda r, p: "peek" in r.tools.successful,
        script=[tc("peek", path=str(OUTSIDE / "o.txt")), "final"],
        base={"workspace": str(WS)},
        tools=_reader,
    ),
    "confine_to_workspace": Probe(
        {"workspace": str(WS), "confine_to_workspace": False},
        lambda r, p: "peek" in r.tools.successful,
        base={"workspace": str(WS)},
        script=[tc("peek", path=str(OUTSIDE / "o.txt")), "final"],
        tools=_reader,
    ),
    "llm_caller": Probe(
        {"llm_caller": lambda call: {"ok": False, "status": "blocked"}},
        lambda r, p: r.status == "provider_error",
    ),
    "llm_retries": Probe(
        {"llm_retries": 1, "llm_backoff_ms": 0},
        lambda r, p: r.status == "done",
        base={"llm_retries": 0},
        script=[{"error": {"message": "flaky", "retryable": True}}, *SCRIPT],
    ),
    "llm_backoff_ms": Probe(
        {"llm_retries": 1, "llm_backoff_ms": 0},
        lambda r, p: r.llm.duration_ms < 400,
        base={"llm_retries": 1, "llm_backoff_ms": 700},
        script=[{"error": {"message": "flaky", "retryable": True}}, *SCRIPT],
    ),
    "schema_retries": Probe(
        {"output_schema": SCHEMA, "schema_retries": 1},
        lambda r, p: r.status == "done",
        base={"output_schema": SCHEMA},
        script=[tc("look"), "not json", '{"a": 1}'],
    ),
    "llm_options": Probe(
        {"llm_options": {"top_p": 0.5}}, lambda r, p: p.requests[0].options.get("top_p") == 0.5
    ),
    "tool_choice": Probe({"tool_choice": "none"}, lambda r, p: p.requests[0].tool_choice == "none"),
    "temperature": Probe(
        {"temperature": 0.2}, lambda r, p: p.requests[0].options.get("temperature") == 0.2
    ),
    "max_tokens": Probe(
        {"max_tokens": 77}, lambda r, p: p.requests[0].options.get("max_tokens") == 77
    ),
    # reasoning options are checked on the body the real provider would send (WireMock)
    "thinking": Probe(
        {**_claude(), "thinking": True},
        lambda r, p: p.bodies[0].get("thinking", {}).get("type") == "enabled",
        base=_claude(),
    ),
    "reasoning_effort": Probe(
        {**_gpt5(), "reasoning_effort": "high"},
        lambda r, p: p.bodies[0].get("reasoning_effort") == "high",
        base=_gpt5(),
    ),
    "interleaved_thinking": Probe(
        {**_claude(), "thinking": True, "interleaved_thinking": True},
        lambda r, p: "interleaved-thinking" in _beta(p),
        base={**_claude(), "thinking": True},
    ),
    "anthropic_beta_features": Probe(
        {**_claude(), "anthropic_beta_features": ["context-1m-2025-08-07"]},
        lambda r, p: _beta(p) == "context-1m-2025-08-07",
        base=_claude(),
    ),
    "reasoning_policy": Probe(
        {**_gpt5(), "reasoning_policy": "off"},
        lambda r, p: p.bodies[0].get("reasoning_effort") == "minimal",
        base=_gpt5(),
    ),
    "thinking_policy": Probe(
        {**_gpt5(), "thinking_policy": "high"},
        lambda r, p: p.bodies[0].get("reasoning_effort") == "high",
        base=_gpt5(),
    ),
    "reasoning_scale": Probe(
        {**_gpt5(), "reasoning_scale": "large"},
        lambda r, p: p.bodies[0].get("reasoning_effort") == "high",
        base=_gpt5(),
    ),
    "problem_scale": Probe(
        {**_gpt5(), "problem_scale": "small"},
        lambda r, p: p.bodies[0].get("reasoning_effort") == "low",
        base=_gpt5(),
    ),
    "reasoning_task": Probe(
        {**_gpt5(), "reasoning_task": "summarize"},
        lambda r, p: p.bodies[0].get("reasoning_effort") == "minimal",
        base=_gpt5(),
    ),
    "context_callback": Probe(
        {"context_callback": lambda ctx: {"system": "SYS2"}}, lambda r, p: _sys0(p) == "SYS2"
    ),
    "context_filter": Probe(
        {"context_filter": lambda ctx: {"system": "SYS3"}}, lambda r, p: _sys0(p) == "SYS3"
    ),
    "post_turn_callback": Probe(
        {"post_turn_callback": lambda t: True}, lambda r, p: r.stop_reason == "post_turn_stop"
    ),
    "verify_completion": Probe(
        {"verify_completion": lambda s: "more" if s["iteration"] < 3 else None},
        lambda r, p: bool(_events(r, "verify_completion_veto")),
        script=[tc("look"), "a", "b"],
    ),
    "verify_completion_judge": Probe(
        {"verify_completion_judge": {"judge": lambda s: True}},
        lambda r, p: "completion_judge" in r.to_dict(),
    ),
    "done_judge": Probe(
        {"done_judge": {"judge": lambda s: True}}, lambda r, p: "done_judge" in r.to_dict()
    ),
    "turn_policy": Probe(
        {"loop_until_done": True, "turn_policy": {"require_action_or_yield": True}},
        lambda r, p: r.llm.iterations == 3,
        base={"loop_until_done": True},
        script=[tc("look"), "final answer", "##DONE##"],
    ),
    "stall_diagnostics": Probe(
        {"stall_diagnostics": True}, lambda r, p: "suspected_loop" in r.to_dict()
    ),
    "require_successful_tools": Probe(
        {"require_successful_tools": ["missing"]}, lambda r, p: r.status == "failed"
    ),
    "stop_after_successful_tools": Probe(
        {"stop_after_successful_tools": ["look"]}, lambda r, p: r.llm.iterations == 1
    ),
    "llm_transcript_dir": Probe(
        {"llm_transcript_dir": str(WS / "sidecar")},
        lambda r, p: (WS / "sidecar" / "llm_transcript.jsonl").exists(),
    ),
    "timestamp_messages": Probe(
        {"timestamp_messages": True, "clock": lambda: 0.0},
        lambda r, p: "[1970-01-01T00:00:00+00:00]" in _all_text(p),
        base={"clock": lambda: 0.0},
    ),
    "message_decorator": Probe(
        {"message_decorator": lambda m, ctx: {**m, "content": "DECORATED"}},
        lambda r, p: "DECORATED" in _all_text(p),
    ),
    "mcp_servers": Probe(
        {"mcp_servers": [{"name": "kb", "command": sys.executable, "args": [SERVER]}]},
        lambda r, p: any(n.startswith("kb__") for n in _tool_names(p)),
    ),
    "session_id": Probe(
        {"session_id": "audit-session"},
        lambda r, p: r.transcript["session_id"] == "audit-session",
    ),
    "skills": Probe({"skills": SKILLS}, lambda r, p: "active_skills" in r.to_dict()),
    "skill_match": Probe(
        {"skills": SKILLS, "working_files": ["a.py"], "skill_match": {"top_n": 0}},
        lambda r, p: "SKILL-PROMPT" not in _sys0(p),
        base={"skills": SKILLS, "working_files": ["a.py"]},
    ),
    "working_files": Probe(
        {"skills": SKILLS, "working_files": ["a.py"]},
        lambda r, p: "SKILL-PROMPT" in _sys0(p),
        base={"skills": SKILLS},
    ),
    "tool_surface_narrowing": Probe(
        {"tool_surface_narrowing": {"window_turns": 1, "mode": "aggressive"}},
        lambda r, p: "spare" not in _tool_names(p, -1),
        script=[tc("look"), tc("look"), tc("look"), "final"],
        tools=lambda: [
            _look(),
            make_tool(lambda: "", name="spare", annotations={"side_effect_level": "read_only"}),
        ],
    ),
    "progress_tool": Probe(
        {"progress_tool": True}, lambda r, p: "agent_progress" in _tool_names(p)
    ),
    "members": Probe(
        {"members": {"helper": lambda task: "helped"}}, lambda r, p: "delegate" in _tool_names(p)
    ),
    "ask_user": Probe({"ask_user": lambda q: "yes"}, lambda r, p: "ask_user" in _tool_names(p)),
    "messages": Probe(
        {"messages": [{"role": "user", "content": "PRIOR"}]},
        lambda r, p: p.requests[0].messages[0]["content"] == "PRIOR",
    ),
    "clock": Probe(
        {"timestamp_messages": True, "clock": lambda: 86400.0 * 365},
        lambda r, p: "[1971-01-01" in _all_text(p),
        base={"timestamp_messages": True},
    ),
    "approval_policy": Probe({"approval_policy": ASK_ALL}, lambda r, p: "look" in r.tools.rejected),
    "permissions": Probe(
        {"permissions": {"deny": ["look"]}}, lambda r, p: "look" in r.tools.rejected
    ),
    "on_escalation": Probe(
        {"approval_policy": ASK_ALL, "on_escalation": lambda req: True},
        lambda r, p: "look" in r.tools.successful,
        base={"approval_policy": ASK_ALL},
    ),
    "approval_store": Probe(
        {"approval_policy": ASK_ALL, "approval_store": {"state_dir": str(WS / "st"), "timeout": 0}},
        lambda r, p: any(e.get("status") == "expired" for e in _events(r, "PermissionDeny")),
        base={"approval_policy": ASK_ALL},
    ),
    "external_roots": Probe(
        {"workspace": str(WS), "external_roots": [str(OUTSIDE)]},
        lambda r, p: "peek" in r.tools.successful,
        base={"workspace": str(WS)},
        script=[tc("peek", path=str(OUTSIDE / "o.txt")), "final"],
        tools=_reader,
    ),
    "session_store": Probe(
        {"session_id": "audit-store", "session_store": str(WS / "sessions")},
        lambda r, p: (WS / "sessions" / "audit-store.jsonl").exists(),
        base={"session_id": "audit-store"},
    ),
    "scratchpad": Probe({"scratchpad": True}, lambda r, p: "<scratchpad" in _sys0(p)),
    "compaction": Probe(
        {**_COMPACT, "compaction": "truncate"},
        lambda r, p: _events(r, "TranscriptCompacted")[0]["engine_strategy"] == "truncate",
        base=dict(_COMPACT),
    ),
    "compact_threshold": Probe(
        {"compact_threshold": 10, "compaction": {"keep_last_n": 0}},
        lambda r, p: bool(_events(r, "TranscriptCompacted")),
        base={"compaction": {"keep_last_n": 0}},
    ),
    "compact_keep_first": Probe(
        {**_COMPACT, "compact_keep_first": 1},
        lambda r, p: str(_turns(p)[0].messages[0]["content"]).startswith("pad pad"),
        base=dict(_COMPACT),
    ),
    "compact_keep_last": Probe(
        {"compact_threshold": 10, "compact_keep_last": 0},
        lambda r, p: bool(_events(r, "TranscriptCompacted")),
        base={"compact_threshold": 10},
    ),
    "compact_strategy": Probe(
        {**_COMPACT, "compact_strategy": "truncate"},
        lambda r, p: _events(r, "TranscriptCompacted")[0]["engine_strategy"] == "truncate",
        base=dict(_COMPACT),
    ),
    "compact_callback": Probe(
        {
            **_COMPACT,
            "compact_strategy": "custom",
            "compact_callback": lambda a, rem, pol: "CUSTOM",
        },
        lambda r, p: "CUSTOM" in _all_text(p),
        base=dict(_COMPACT),
    ),
    "compaction_policy": Probe(
        {**_COMPACT, "compaction_policy": compaction_policy(instructions="KEEP-NOTE")},
        lambda r, p: "KEEP-NOTE" in _all_text(p),
        base=dict(_COMPACT),
    ),
    "auto_compact": Probe(
        {**_COMPACT, "auto_compact": False},
        lambda r, p: not _events(r, "TranscriptCompacted"),
        base=dict(_COMPACT),
    ),
    "transcript_projection": Probe(
        {"transcript_projection": {"policy": "summary_prefix", "text": "PFX"}},
        lambda r, p: "PFX" in str(p.requests[0].messages[0]["content"]),
    ),
    "step_judge": Probe(
        {"step_judge": {"judge": lambda s: True}},
        lambda r, p: bool(_events(r, "step_judge_decision")),
    ),
    "max_verify_attempts": Probe(
        {"loop_until_done": True, "verify_completion": lambda s: "no", "max_verify_attempts": 1},
        lambda r, p: r.stop_reason == "max_verify_attempts",
        base={"loop_until_done": True, "verify_completion": lambda s: "no"},
        script=[tc("look"), "a", "b", "c"],
    ),
    "daemon": Probe({"daemon": True}, lambda r, p: r.status == "idle"),
    "persist_path": Probe(
        {"daemon": True, "persist_path": str(WS / "st" / "daemon"), "idle_watchdog_attempts": 1},
        lambda r, p: r.to_dict().get("daemon_snapshot_path") is not None,
        base={"daemon": True, "idle_watchdog_attempts": 1},
    ),
    "resume_path": Probe(
        {"daemon": True, "resume_path": str(RESUME), "idle_watchdog_attempts": 1},
        lambda r, p: "FROM-SNAPSHOT" in _all_text(p),
        base={"daemon": True, "idle_watchdog_attempts": 1},
    ),
    "wake_interval_ms": Probe(
        {"daemon": True, "wake_interval_ms": 10, "max_iterations": 3},
        lambda r, p: "[daemon wake: timer]" in _all_text(p),
        base={"daemon": True, "max_iterations": 3},
    ),
    "watch_paths": Probe(
        {"daemon": True, "watch_paths": [str(WS / "nope")], "idle_watchdog_attempts": 2},
        lambda r, p: r.status == "watchdog",
        base={"daemon": True, "idle_watchdog_attempts": 2},
    ),
    "consolidate_on_idle": Probe(
        {**_IDLE_COMPACT, "consolidate_on_idle": True},
        lambda r, p: any(e["reason"] == "idle" for e in _events(r, "TranscriptCompacted")),
        base=dict(_IDLE_COMPACT),
    ),
    "idle_watchdog_attempts": Probe(
        {"daemon": True, "wake_interval_ms": 1000, "idle_watchdog_attempts": 2},
        lambda r, p: r.status == "watchdog",
        base={"daemon": True, "wake_interval_ms": 1000, "max_iterations": 2},
    ),
    "system_reminders": Probe(
        {"system_reminders": ["Never push to main."]},
        lambda r, p: "Never push to main." in _all_text(p),
    ),
    "hooks": Probe({"hooks": [_Tagger()]}, lambda r, p: "HOOKED" in _sys0(p)),
    "prompts": Probe(
        {"loop_until_done": True, "prompts": {"agent.loop_contract": {"text": "FINISH-LIKE-X"}}},
        lambda r, p: "FINISH-LIKE-X" in _sys0(p),
        base={"loop_until_done": True},
    ),
    "prompt_overrides": Probe(
        {"loop_until_done": True, "prompt_overrides": {"agent.loop_contract": {"text": "PO"}}},
        lambda r, p: _sys0(p).endswith("PO"),
        base={"loop_until_done": True},
    ),
    "subagents": Probe({"subagents": True}, lambda r, p: "subagent_pause" in _tool_names(p)),
    "subagent_tools": Probe(
        {"subagent_tools": True}, lambda r, p: "subagent_resume" in _tool_names(p)
    ),
    "prefetch_next_turn": Probe(
        {"hooks": [_SEEN_AT], "prefetch_next_turn": True},
        # flushed in the background: by then the next turn's request had gone out
        lambda r, p: _SEEN_AT.seen[-1] == 2,
        base={"hooks": [_SEEN_AT]},
    ),
    "output_schema": Probe(
        {"output_schema": SCHEMA},
        lambda r, p: "data" in r.to_dict(),
        script=[tc("look"), '{"a": 1}'],
    ),
}


def _run(options: dict[str, Any], probe: Probe) -> tuple[Any, MockProvider]:
    for leftover in ("sidecar", "sessions", "st"):  # each run starts without earlier files
        shutil.rmtree(WS / leftover, ignore_errors=True)
    opts = dict(options)
    provider = opts.pop("provider", None) or MockProvider(list(probe.script))
    if "tools" not in opts:
        opts["tools"] = probe.tools() if probe.tools else [_look()]
    started = time.perf_counter()
    result = agent_loop("task", provider=provider, **opts)
    assert time.perf_counter() - started < 30
    return result, provider


def test_every_known_option_has_a_probe() -> None:
    assert sorted(set(KNOWN_OPTIONS) - set(PROBES)) == []
    assert sorted(set(PROBES) - set(KNOWN_OPTIONS)) == []


@pytest.mark.parametrize("option", sorted(PROBES))
def test_option_changes_something_observable(option: str) -> None:
    probe = PROBES[option]
    assert option in probe.opts
    assert probe.base.get(option, "<unset>") != probe.opts[option]
    with_result, with_provider = _run(probe.opts, probe)
    assert probe.check(with_result, with_provider), f"{option}: no effect observed"
    base_result, base_provider = _run(probe.base, probe)
    assert not probe.check(base_result, base_provider), f"{option}: the twin shows it too"
