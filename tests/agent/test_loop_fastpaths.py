"""The loop's per-turn shortcuts answer what the long way answers (issue 12, speed).

Each shortcut skips work between turns when nothing it depends on changed: these tests
change those things mid-run (a tracer provider installed, a hidden tool called, a hook
added, a handler that retries or answers later) and check the effect.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import subprocess
import sys
from typing import Any

import pytest

from charter.agent import CombinedHooks, LoopHook, MockProvider, agent_loop, make_tool
from charter.agent.dispatch import Dispatcher
from charter.agent.providers.base import ToolCallRequest
from charter.agent.suspension import TOOL as LIFECYCLE
from charter.policy import ScopeViolation, make_context, with_execution_policy

from .conftest import Recorder, tc

# -- dispatch: a synchronous handler's call completes without a coroutine of its own --


def _handlers() -> dict[str, Any]:
    state: dict[str, int] = {}

    def count(name: str) -> int:
        state[name] = state.get(name, 0) + 1
        return state[name]

    async def later(value: Any) -> Any:
        await asyncio.sleep(0)
        return value

    def ok() -> str:
        return "fine"

    def status_error() -> dict[str, Any]:
        return {"status": "error", "error": "nope"}

    def raises() -> str:
        raise RuntimeError("boom")

    def flaky() -> str:
        if count("flaky") < 3:
            raise RuntimeError("transient")
        return "third time"

    def flaky_status() -> dict[str, Any]:
        if count("flaky_status") < 2:
            return {"status": "error", "reason": "busy"}
        return {"status": "ok", "audit": {"bytes": 3}}

    async def async_ok() -> dict[str, Any]:
        return {"status": "ok", "value": 1}

    async def async_raises() -> str:
        raise ValueError("late")

    def returns_awaitable() -> Any:  # a sync handler answering with a coroutine
        return later({"status": "ok", "late": True})

    def denied_receipt() -> dict[str, Any]:
        return {"error": "permission_denied", "reason": "the tool said so"}

    return {
        f.__name__: f
        for f in (
            ok,
            status_error,
            raises,
            flaky,
            flaky_status,
            async_ok,
            async_raises,
            returns_awaitable,
            denied_receipt,
        )
    }


def _outcome(o: Any) -> dict[str, Any]:
    out = o.to_dict()
    out["observation"] = o.observation
    return out


@pytest.mark.parametrize("retries", [0, 1, 3])
def test_dispatch_paths_agree(retries: int, tmp_path: Any) -> None:
    """``dispatch`` (the synchronous shortcut) and ``dispatch_one`` (always a coroutine)
    give the same outcomes, attempts and back-off sleeps for every kind of handler."""
    results = []
    for path in ("dispatch", "dispatch_one"):
        sleeps: list[float] = []

        async def sleep(seconds: float, sleeps: list[float] = sleeps) -> None:
            sleeps.append(seconds)

        handlers = _handlers()
        tools = [make_tool_named(name, f) for name, f in handlers.items()]
        dispatcher = Dispatcher(
            tools,
            context=make_context(str(tmp_path)),
            tool_retries=retries,
            tool_backoff_ms=5,
            sleep=sleep,
        )
        requests = [ToolCallRequest(f"c_{n}", n, {}) for n in handlers]
        requests.append(ToolCallRequest("c_x", "missing", {}))
        requests.append(ToolCallRequest("c_bad", "ok", {}, parse_error="bad JSON"))

        async def go(
            dispatcher: Dispatcher = dispatcher,
            path: str = path,
            requests: list[ToolCallRequest] = requests,
        ) -> list[Any]:
            if path == "dispatch":
                return [await dispatcher.dispatch([r]) for r in requests]
            return [[await dispatcher.dispatch_one(r)] for r in requests]

        outcomes = [_outcome(o[0]) for o in asyncio.run(go())]
        results.append((outcomes, sleeps))
    assert results[0] == results[1]
    by_name = {o["tool_name"]: o for o in results[0][0]}
    assert by_name["flaky"]["ok"] is (retries >= 2)
    assert by_name["flaky"]["attempts"] == min(3, retries + 1)
    assert by_name["flaky_status"]["ok"] is (retries >= 1)
    assert by_name["returns_awaitable"]["observation"] == {"status": "ok", "late": True}
    assert by_name["async_raises"]["error"] == "ValueError: late"
    assert by_name["missing"]["status"] == "unknown_tool"
    assert by_name["denied_receipt"]["status"] == "permission_denied"


def make_tool_named(name: str, handler: Any) -> Any:
    return make_tool(handler, name=name, side_effect_level="none")


def test_scope_violation_from_a_sync_handler_still_propagates(tmp_path: Any) -> None:
    def escape() -> str:
        raise ScopeViolation({"reason": "out of scope"})

    dispatcher = Dispatcher(
        [make_tool_named("escape", escape)], context=make_context(str(tmp_path))
    )
    with pytest.raises(ScopeViolation):
        asyncio.run(dispatcher.dispatch([ToolCallRequest("c1", "escape", {})]))


def test_a_changed_registry_entry_is_seen(tmp_path: Any) -> None:
    """The per-name call template follows the registry: a tool replaced under the same
    name is decided with its own annotations (here: a level the policy refuses)."""
    calm = make_tool_named("act", lambda: "calm")
    dispatcher = Dispatcher([calm], context=make_context(str(tmp_path)))
    request = ToolCallRequest("c1", "act", {})
    with with_execution_policy({"side_effect_level": "read_only"}):
        first = asyncio.run(dispatcher.dispatch([request]))[0]
        loud = make_tool(lambda: "loud", name="act", side_effect_level="network")
        dispatcher.registry["act"] = loud
        second = asyncio.run(dispatcher.dispatch([request]))[0]
    assert first.ok and first.observation == "calm"
    assert second.status == "permission_denied" and "network" in second.rendered


# -- tool-surface narrowing: turns in between are skipped, the surface is the same --


def _reference_surfaces(script: list[str], tools: list[str], window: int) -> list[list[str]]:
    """What each request offers, worked out from scratch every turn (all tools read-only)."""
    last: dict[str, int] = {}
    hidden: list[str] = []
    out = []
    for iteration in range(1, len(script) + 2):
        if iteration > window:
            floor = iteration - 1 - window
            hidden = [t for t in tools if last.get(t, 0) <= floor]
        out.append([t for t in tools if t not in hidden])
        if iteration <= len(script):
            last[script[iteration - 1]] = iteration
    return out


@pytest.mark.parametrize("seed", range(12))
def test_narrowing_matches_a_from_scratch_reference(seed: int, rec: Recorder) -> None:
    rng = random.Random(seed)
    names = ["a", "b", "c", "d"][: rng.randint(1, 4)]
    window = rng.randint(1, 4)
    # bursts of one tool, then others: tools go stale, are hidden, and are called back
    script: list[str] = []
    while len(script) < 40:
        script.extend([rng.choice(names)] * rng.randint(1, 7))
    provider = MockProvider([*(tc(n) for n in script), "done"])
    result = agent_loop(
        "x",
        provider=provider,
        tools=[rec.tool(n) for n in names],
        tool_surface_narrowing={"window_turns": window},
        max_iterations=len(script) + 1,
    )
    offered = [[t["name"] for t in r.tools if t["name"] != LIFECYCLE] for r in provider.requests]
    assert offered == _reference_surfaces(script, names, window)
    changes = sum(1 for prev, cur in itertools.pairwise(offered) if prev != cur)
    events = [e for e in result.trace["events"] if e["type"] == "skill_narrow"]
    assert len(events) == changes
    assert rec.names() == script  # hiding is not enforcing: hidden tools still ran


# -- hooks: which hooks act per turn is worked out again when the list changes --


class _Counting(LoopHook):
    def __init__(self) -> None:
        self.turns: list[int] = []

    async def before_model_call(self, run: Any, iteration: int) -> None:
        self.turns.append(iteration)


def test_combined_hooks_follow_their_list() -> None:
    hooks = CombinedHooks()
    first, late = _Counting(), _Counting()
    hooks.add(first)
    asyncio.run(hooks.before_model_call(None, 1))
    hooks.add(late)  # added after a turn ran
    asyncio.run(hooks.before_model_call(None, 2))
    plain = LoopHook()
    seen: list[int] = []

    async def on_instance(run: Any, iteration: int) -> None:
        seen.append(iteration)

    plain.before_model_call = on_instance  # type: ignore[method-assign]
    hooks.hooks[0] = plain  # replaced in place
    asyncio.run(hooks.before_model_call(None, 3))
    assert first.turns == [1, 2] and late.turns == [2, 3] and seen == [3]


class _Plain(LoopHook):
    """Per-turn points as plain methods (no coroutine per turn)."""

    def __init__(self, objection: dict[str, Any] | None) -> None:
        self.turns: list[int] = []
        self.objection = objection

    def before_model_call(self, run: Any, iteration: int) -> None:  # type: ignore[override]
        self.turns.append(iteration)

    def before_dispatch(  # type: ignore[override]
        self, run: Any, iteration: int, text: str, calls: list[Any]
    ) -> dict[str, Any] | None:
        return self.objection


class _Objecting(LoopHook):
    async def before_dispatch(
        self, run: Any, iteration: int, text: str, calls: list[Any]
    ) -> dict[str, Any] | None:
        return {"action": "stop", "stop_reason": "async"}


def test_plain_and_coroutine_points_mix() -> None:
    quiet, loud = _Plain(None), _Plain({"action": "stop", "stop_reason": "plain"})
    hooks = CombinedHooks([quiet, _Objecting()])
    asyncio.run(hooks.before_model_call(None, 4))
    assert quiet.turns == [4]
    assert asyncio.run(hooks.before_dispatch(None, 4, "", [])) == {
        "action": "stop",
        "stop_reason": "async",
    }
    hooks.hooks.insert(0, loud)
    directive = asyncio.run(hooks.before_dispatch(None, 5, "", []))
    assert directive is loud.objection


# -- tracer: a provider installed mid-run gets the spans from then on --

_MID_RUN = """
import json, os, sys
from opentelemetry import trace
from charter.agent import MockProvider, agent_loop, make_tool

memory = []

def install():
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    if sys.argv[1] == "set":
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        memory.append(exporter)
    else:  # named in the environment: get_tracer_provider loads it when next asked
        os.environ["OTEL_PYTHON_TRACER_PROVIDER"] = "sdk_tracer_provider"

calls = []

def step():
    calls.append(1)
    if len(calls) == 2:
        install()
    return "ok"

turns = [{"tool_calls": [{"name": "step", "arguments": {}}]}] * 4 + ["done"]
agent_loop("x", provider=MockProvider(turns), tools=[make_tool(step, side_effect_level="none")])
spans = [s.name for s in memory[0].get_finished_spans()] if memory else []
loaded = trace._TRACER_PROVIDER
print(json.dumps({"spans": spans, "loaded": type(loaded).__name__ if loaded else None}))
"""


@pytest.mark.parametrize("how", ["set", "environment"])
def test_a_tracer_provider_installed_mid_run_is_used(how: str, tmp_path: Any) -> None:
    """Installed during the second tool call: the calls and turns after it get spans
    (``set_tracer_provider``), or the provider the environment names is loaded."""
    pytest.importorskip("opentelemetry.sdk")
    script = tmp_path / "mid_run.py"
    script.write_text(_MID_RUN)
    out = subprocess.run(
        [sys.executable, str(script), how], capture_output=True, text=True, check=True
    )
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen["loaded"] == "TracerProvider"
    if how == "set":
        assert seen["spans"] == ["chat", "execute_tool step"] * 2 + ["chat"]


# -- requests: built without the frozen dataclass's __init__, the same object --


def test_new_request_is_the_dataclass() -> None:
    from charter.agent import LlmRequest
    from charter.agent.providers.base import new_request

    messages: list[dict[str, Any]] = [{"role": "user", "content": "x"}]
    tools = [{"name": "t", "description": "", "parameters": {}}]
    made = new_request("m", "sys", messages, tools, "auto", {"temperature": 0})
    expected = LlmRequest("m", "sys", messages, tools, "auto", {"temperature": 0})
    assert made == expected and repr(made) == repr(expected)
    assert made.messages is messages and made.purpose == "turn"
    with pytest.raises(AttributeError):
        made.model = "other"  # type: ignore[misc]  # still frozen
