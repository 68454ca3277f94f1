"""Agent-loop overhead per iteration with the mock provider and one tool call per iteration.

Run: ``python benchmarks/agent_loop_overhead.py [iterations]``. Prints the per-iteration
loop overhead (everything except the model, which the mock answers instantly) and the
fraction of that time spent in policy decisions (``charter.policy.decide_current``).
"""

from __future__ import annotations

import sys
import tempfile
import time

from charter.agent import MockProvider, agent_loop, make_tool


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
        provider = MockProvider([*turns, "done"])
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
    n = result.llm.iterations
    policy_ms = float(result.trace["policy_ms"])
    per_iter_ms = elapsed * 1000 / n
    print(f"iterations:                {n}")
    print(f"tool calls:                {result.trace['policy_decisions']}")
    print(f"loop overhead / iteration: {per_iter_ms * 1000:.1f} us")
    print(f"policy decision / call:    {policy_ms * 1000 / max(1, n - 1):.1f} us")
    print(f"fraction in policy:        {policy_ms / (elapsed * 1000):.1%}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
