"""100 concurrent mock workers, 5 tool calls each: wall time and the policy's share.

Run: ``python benchmarks/workers.py [workers] [calls]``. Every worker is spawned under a
parent policy stack (tools, paths, side-effect ceiling) with its own ``allowed_tools``
frame and a token budget reserved from the parent; its tool calls read a file argument,
so every decision checks the path rules. Prints the wall time of the whole fleet, the
time per tool call, and the share of the fleet's wall time spent in policy decisions.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from charter.agent import MockProvider, make_tool, spawn_agent, wait_agent
from charter.agent.subagents import _LEDGER, TokenLedger
from charter.policy import with_execution_policy


def main(workers: int = 100, calls: int = 5) -> None:
    workspace = Path(tempfile.mkdtemp(prefix="charter-bench-workers-"))
    (workspace / "src").mkdir()
    (workspace / "src" / "a.py").write_text("x = 1\n")

    def lookup(path: str) -> str:
        return (workspace / path).read_text()

    tool = make_tool(
        lookup,
        name="lookup",
        annotations={"side_effect_level": "read_only", "kind": "read", "path_args": ["path"]},
    )
    script: list[Any] = [
        {
            "tool_calls": [{"name": "lookup", "arguments": {"path": "src/a.py"}}],
            "usage": {"input_tokens": 10, "output_tokens": 2},
        }
        for _ in range(calls)
    ]

    async def fleet() -> tuple[float, list[dict[str, Any]]]:
        ledger = TokenLedger(workers * calls * 20)
        token = _LEDGER.set(ledger)
        try:
            with with_execution_policy(
                {
                    "tools": {"deny": ["bash"]},
                    "paths": {"allow": ["./src"], "deny": ["./src/secret"]},
                    "side_effect_level": "workspace_write",
                },
                label="parent",
            ):
                start = time.perf_counter()
                handles = [
                    await spawn_agent(
                        {
                            "task": f"job {i}",
                            "tools": [tool],
                            "allowed_tools": ["lookup"],
                            "token_budget": calls * 20,
                            "provider": MockProvider([*script, "done"]),
                            "options": {"workspace": str(workspace)},
                        }
                    )
                    for i in range(workers)
                ]
                done = await wait_agent(handles)
                return time.perf_counter() - start, done
        finally:
            _LEDGER.reset(token)

    wall, done = asyncio.run(fleet())
    ok = sum(1 for d in done if d["ok"])
    tool_calls = sum(d["policy"]["decisions"] for d in done)
    policy_ms = sum(d["policy"]["ms"] for d in done)
    print(f"workers: {workers}, tool calls each: {calls}, ok: {ok}/{workers}")
    print(
        f"wall time: {wall * 1000:.1f} ms ({wall * 1e6 / max(1, tool_calls):.0f} us per tool call)"
    )
    print(
        f"policy decisions: {tool_calls}, {policy_ms:.1f} ms, "
        f"{100 * policy_ms / (wall * 1000):.1f}% of wall time"
    )


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
