"""Agent-loop overhead per iteration with the mock provider and one tool call per iteration.

Run: ``python benchmarks/agent_loop_overhead.py [iterations]``. Prints the per-iteration
loop overhead (everything except the model, which the mock answers instantly) and the
fraction of that time spent in policy decisions (``charter.policy.decide_current``), next
to a hand-written loop doing the same mock call and tool call in the same run (the ratio
is the number to watch; issue 12 aims at <= 4x), and the per-iteration cost of the first
and last tenth of the run (flat in conversation length when they match).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from typing import Any

from charter.agent import LlmRequest, MockProvider, agent_loop, make_tool


class TimedMock(MockProvider):
    """The mock provider, stamping when each request arrives."""

    def __init__(self, turns: list[Any]) -> None:
        super().__init__(turns)
        self.request_times: list[float] = []

    async def complete(self, request: LlmRequest) -> Any:
        self.request_times.append(time.perf_counter())
        return await super().complete(request)


def hand_written(turns: list[Any], tool: Any) -> float:
    """The same mock call and tool call in a plain loop: the baseline, in seconds."""
    provider = MockProvider([*turns, "done"])
    schema = [tool.schema()]

    async def run() -> None:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "bench"}]
        while True:
            response = await provider.complete(LlmRequest("m", None, messages, schema))
            if not response.tool_calls:
                return
            messages.append({"role": "assistant", "content": response.text})
            for call in response.tool_calls:
                out = tool.handler(**call.arguments)
                messages.append({"role": "tool", "content": json.dumps(out)})

    start = time.perf_counter()
    asyncio.run(run())
    return time.perf_counter() - start


def main(iterations: int = 2000) -> None:
    def lookup(key: str) -> str:
        return key

    tool = make_tool(
        lookup, annotations={"side_effect_level": "read_only", "kind": "read", "path_args": ["key"]}
    )
    turns = [{"tool_calls": [{"name": "lookup", "arguments": {"key": "src/a.py"}}]}] * iterations
    policy = {
        "tools": {"allow": ["lookup", "read*"], "deny": ["bash"]},
        "side_effect_level": "workspace_write",
        "paths": {"deny": ["secrets/**"]},
    }
    with tempfile.TemporaryDirectory() as ws:
        # warm-up (imports, compiled policy matchers)
        agent_loop(
            "warm",
            provider=MockProvider([*turns[:50], "done"]),
            tools=[tool],
            policy=policy,
            workspace=ws,
            max_iterations=100,
        )
        provider = TimedMock([*turns, "done"])
        start = time.perf_counter()
        result = agent_loop(
            "bench",
            provider=provider,
            tools=[tool],
            policy=policy,
            workspace=ws,
            max_iterations=iterations + 1,
        )
        elapsed = time.perf_counter() - start
        baseline = hand_written(turns, tool)
    n = result.llm.iterations
    policy_ms = float(result.trace["policy_ms"])
    per_iter_ms = elapsed * 1000 / n
    print(f"iterations:                {n}")
    print(f"tool calls:                {result.trace['policy_decisions']}")
    print(f"loop overhead / iteration: {per_iter_ms * 1000:.1f} us")
    print(f"policy decision / call:    {policy_ms * 1000 / max(1, n - 1):.1f} us")
    print(f"fraction in policy:        {policy_ms / (elapsed * 1000):.1%}")
    base_us = baseline * 1e6 / n
    print(f"hand-written loop / iter:  {base_us:.1f} us")
    print(f"ratio agent_loop / hand:   {per_iter_ms * 1000 / base_us:.1f}x")
    stamps = provider.request_times
    if len(stamps) > 20:
        tenth = len(stamps) // 10
        first = (stamps[tenth] - stamps[0]) * 1e6 / tenth
        last = (stamps[-1] - stamps[-1 - tenth]) * 1e6 / tenth
        print(f"first tenth / last tenth:  {first:.1f} us / {last:.1f} us per iteration")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
