"""``charter[otel]``: GenAI-convention spans for a persona run, its model and tool calls."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import envelope, run_json

pytest.importorskip("opentelemetry.sdk")

ALLOWED = {"tool": "github", "args": {"action": "merge", "pr": 7}, "stage": "act"}
DENIED = {"tool": "github", "args": {"action": "merge", "pr": 1}, "stage": "look"}


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


def test_run_model_and_tool_spans(
    exporter: Any, make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    pack = make_pack()
    plan = {"calls": [ALLOWED, DENIED], "agent": "Do the work.", "agent_tools": ["read"]}
    data = run_json(pack, "actor", "--payload", str(envelope(tmp_path / "e.json", plan)))
    spans = {s.name: s for s in exporter.get_finished_spans()}
    run = spans["invoke_agent actor"]
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.agent.id"] == data["run_id"]
    assert run.attributes["charter.run.status"] == data["status"]

    tools = [s for s in exporter.get_finished_spans() if s.name == "execute_tool github"]
    allowed, denied = tools
    assert allowed.attributes["charter.policy.decision"] == "allow"
    assert allowed.attributes["charter.tool.status"] == "ok"
    assert denied.attributes["charter.policy.decision"] == "deny"
    assert denied.attributes["charter.policy.frame"] == "stage:look"
    assert denied.attributes["charter.policy.dimension"]
    assert denied.attributes["error.type"] == "permission_denied"
    for tool in tools:  # children of the run span
        assert tool.parent is not None and tool.parent.span_id == run.context.span_id

    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    assert chats, [s.name for s in exporter.get_finished_spans()]
    chat = chats[0]
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.request.model"] == "m-small"
    assert chat.attributes["gen_ai.usage.input_tokens"] >= 0
    assert "gen_ai.usage.output_tokens" in chat.attributes


def test_without_the_extra_nothing_is_imported(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    """A whole run (model and tool calls) with ``opentelemetry`` made unimportable."""
    pack = make_pack()
    plan = {"calls": [ALLOWED, DENIED], "agent": "Do the work.", "agent_tools": ["read"]}
    args = ["persona", "run", "actor", "--json", "--payload",
            str(envelope(tmp_path / "e.json", plan)), "--manifest", str(pack),
            "--state-dir", str(pack / "state")]  # fmt: skip
    probe = (
        "import json, sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'opentelemetry':\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from charter.cli import main\n"
        "try:\n"
        f"    main({args!r})\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('opentelemetry'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert '"status": "completed"' in out.stdout
    assert lines[-1] == "[]"
