"""One trace per run (OpenTelemetry GenAI conventions): ``invoke_agent`` > ``chat`` /
``execute_tool``; sub-agents under the tool call that started them; a resumed worker
continues the trace its snapshot carries."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from charter.agent import MockProvider, agent_loop
from charter.agent.snapshots import load_snapshot, resume_agent
from charter.agent.subagents import sub_agent_tool
from charter.agent.workers import WorkerPool, wait_agent

from .conftest import Recorder, tc

pytest.importorskip("opentelemetry.sdk")


@pytest.fixture
def exporter() -> Iterator[Any]:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from charter.agent import telemetry

    memory = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # the global provider can be set once
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    telemetry.reset()
    yield memory
    memory.shutdown()  # later tests' spans are dropped


def _by_name(spans: Any) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for s in spans:
        out.setdefault(s.name.split(" ")[0], []).append(s)
    return out


def test_a_run_is_one_trace(exporter: Any, rec: Recorder) -> None:
    agent_loop(
        "x",
        provider=MockProvider([tc("look"), tc("secret"), "done"]),
        tools=[rec.tool("look"), rec.tool("secret")],
        policy={"tools": {"deny": ["secret"]}},
        policy_label="reviewer",
    )
    spans = exporter.get_finished_spans()
    assert len({s.context.trace_id for s in spans}) == 1  # one trace
    roots = [s for s in spans if s.parent is None]
    assert [s.name for s in roots] == ["invoke_agent reviewer"]
    root = roots[0]
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    named = _by_name(spans)
    assert len(named["chat"]) == 3 and len(named["execute_tool"]) == 2
    for child in named["chat"] + named["execute_tool"]:
        assert child.parent.span_id == root.context.span_id
    denied = next(s for s in named["execute_tool"] if s.name == "execute_tool secret")
    assert denied.attributes["charter.policy.decision"] == "deny"
    assert denied.attributes["charter.policy.frame"] == "reviewer"


def test_a_sub_agent_is_a_child_of_the_tool_call(exporter: Any, rec: Recorder) -> None:
    child = MockProvider(["child done"])
    agent_loop(
        "x",
        provider=MockProvider([tc("sub_agent_run", task="dig"), "done"]),
        tools=[sub_agent_tool([rec.tool("look")], provider=child)],
    )
    spans = exporter.get_finished_spans()
    assert len({s.context.trace_id for s in spans}) == 1
    call = next(s for s in spans if s.name == "execute_tool sub_agent_run")
    agents = [s for s in spans if s.name.startswith("invoke_agent")]
    assert len(agents) == 2
    inner = next(s for s in agents if s.parent is not None)
    assert inner.parent.span_id == call.context.span_id


def test_a_resumed_worker_continues_the_trace(
    exporter: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    parked = agent_loop("x", provider=MockProvider([tc("agent_await_resumption", reason="later")]))
    snapshot_path = parked.to_dict()["handle"]["snapshot_path"]
    snap = load_snapshot(snapshot_path)
    assert "traceparent" in snap["trace_context"]
    first_trace = {s.context.trace_id for s in exporter.get_finished_spans()}
    exporter.clear()

    async def resume() -> None:  # outside any span, as another process would be
        pool = WorkerPool()
        handle = await resume_agent(snapshot_path, "go", provider=MockProvider(["ok"]), pool=pool)
        await wait_agent(handle, pool=pool)

    asyncio.run(resume())
    resumed = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
    assert resumed and {s.context.trace_id for s in resumed} == first_trace
