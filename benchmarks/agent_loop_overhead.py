"""Agent-loop overhead per iteration with the mock provider and one tool call per iteration.

Run: ``python benchmarks/agent_loop_overhead.py [iterations] [--rounds N] [--baseline SRC]``.
Prints the per-iteration loop overhead (everything except the model, which the mock
answers instantly) and the part of it spent in policy decisions
(``charter.policy.decide_current``), next to a hand-written loop doing the same mock call
and tool call in the same process (the ratio is the number to watch; issue 33 aims at
<= 3x, streaming off), the per-iteration cost of the first and last tenth of the run
(flat in conversation length when they match), and what ``agent_stream`` adds per event
it yields (the same run, every event consumed).

Each round runs in a fresh process; ``--baseline SRC`` (the ``src`` directory of another
charter checkout, e.g. ``git archive main src | tar -x -C /tmp/base``) runs the same
measurement against that code, alternating with this one round by round, so both see the
same machine load. Medians over the rounds are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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
    """The same mock call and tool call in a plain loop: the baseline, in seconds.

    It uses the same stamping provider as the measured loop, so neither side pays for
    the stamps alone (about 0.35 us a call)."""
    provider = TimedMock([*turns, "done"])
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


def measure(
    iterations: int, around: tuple[Callable[[], None], Callable[[], None]] | None = None
) -> dict[str, float]:
    """One run of both loops in this process: per-iteration microseconds.

    ``around``: called just before and just after the timed agent loop (``--breakdown``).
    """

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
        hand_written(turns[:50], tool)
        provider = TimedMock([*turns, "done"])
        # each timed loop starts from a collected heap: a collection the warm-up (or the
        # other loop) made due would otherwise land in whichever loop runs next
        gc.collect()
        if around is not None:
            around[0]()
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
        if around is not None:
            around[1]()
        gc.collect()
        baseline = hand_written(turns, tool)
        gc.collect()
        streamed, events = stream_run(turns, tool, policy, ws, iterations)
    n = result.llm.iterations
    ran = result.trace["policy_decisions"] == iterations and not result.tools.rejected
    assert ran, "the tool calls did not all run"
    stamps = provider.request_times
    tenth = max(1, len(stamps) // 10)
    return {
        "iterations": n,
        "loop_us": elapsed * 1e6 / n,
        "policy_us": float(result.trace["policy_ms"]) * 1000 / max(1, n - 1),
        "hand_us": baseline * 1e6 / n,
        "first_tenth_us": (stamps[tenth] - stamps[0]) * 1e6 / tenth,
        "last_tenth_us": (stamps[-1] - stamps[-1 - tenth]) * 1e6 / tenth,
        # agent_stream over the same run: what each event adds (0 when the stream path
        # is absent, e.g. a baseline without agent_stream)
        "event_us": max(0.0, (streamed - elapsed) * 1e6 / events) if events else 0.0,
        "events_per_iteration": events / n,
    }


def stream_run(
    turns: list[Any], tool: Any, policy: dict[str, Any], ws: str, iterations: int
) -> tuple[float, int]:
    """The same run through ``agent_stream``, every event consumed: ``(seconds, events)``."""
    try:
        from charter.agent import agent_stream
    except ImportError:  # a baseline from before streaming
        return 0.0, 0

    async def consume() -> int:
        count = 0
        async for _ in agent_stream(
            "bench",
            provider=TimedMock([*turns, "done"]),
            tools=[tool],
            policy=policy,
            workspace=ws,
            max_iterations=iterations + 1,
        ):
            count += 1
        return count

    start = time.perf_counter()
    events = asyncio.run(consume())
    return time.perf_counter() - start, events


def breakdown(iterations: int) -> None:
    """Per-iteration time by loop stage: each stage is wrapped in a timer (about 0.2 us
    of wrapper each, so the stages add up to a little more than the plain run)."""
    import charter.policy.paths as policy_paths
    from charter.agent import dispatch, hooks, loop, modelcall, surface

    spent: dict[str, float] = {}
    clock = time.perf_counter

    def timed(owner: Any, name: str, label: str) -> None:
        inner = getattr(owner, name)
        spent[label] = 0.0
        if asyncio.iscoroutinefunction(inner):

            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                start = clock()
                try:
                    return await inner(*args, **kwargs)
                finally:
                    spent[label] += clock() - start

            setattr(owner, name, async_wrapper)
        else:

            def wrapper(*args: Any, **kwargs: Any) -> Any:
                start = clock()
                try:
                    return inner(*args, **kwargs)
                finally:
                    spent[label] += clock() - start

            setattr(owner, name, wrapper)

    stages = [
        (hooks.CombinedHooks, "before_model_call", "hooks before the model call", 0),
        (surface, "next_request", "the request", 0),
        (loop._Run, "visible_tools", "visible tools", 1),
        (loop._Run, "effective_system", "system prompt", 1),
        (loop._Run, "prompt_messages", "prompt messages", 1),
        (modelcall.ModelCalls, "_direct", "model call (retry loop)", 0),
        (MockProvider, "complete", "mock provider (also in the hand loop)", 1),
        (hooks.CombinedHooks, "before_dispatch", "hooks before dispatch", 0),
        (dispatch.Dispatcher, "dispatch", "dispatch", 0),
        (dispatch, "decide_current", "policy decision", 1),
        (policy_paths, "realpath", "path resolution (syscalls)", 2),
        (dispatch.Dispatcher, "_call", "tool handler", 1),
        (loop._Run, "record_outcomes", "recording outcomes and audit events", 0),
    ]
    for owner, name, label, _ in stages:
        timed(owner, name, label)
    snapshot: dict[str, float] = {}

    def reset() -> None:
        for key in spent:
            spent[key] = 0.0

    def keep() -> None:
        snapshot.clear()
        snapshot.update(spent)

    best: tuple[float, dict[str, float]] | None = None
    for _ in range(3):
        loop_us = measure(iterations, (reset, keep))["loop_us"]
        if best is None or loop_us < best[0]:
            best = (loop_us, dict(snapshot))
    assert best is not None
    loop_us, parts = best
    per = 1e6 / (iterations + 1)
    print("per iteration, by stage (best of 3 runs; each timer adds about 0.2 us):")
    print(f"  {'agent loop, total:':<46} {loop_us:6.1f} us")
    staged = 0.0
    for _, _, label, depth in stages:
        print(f"  {'  ' * depth}{label + ':':<{46 - 2 * depth}} {parts[label] * per:6.1f} us")
        if depth == 0:
            staged += parts[label] * per
    print(f"  {'the loop body and the rest:':<46} {loop_us - staged:6.1f} us")


def _child(iterations: int, src: str | None) -> dict[str, float]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # timing includes no recompilation
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    out = subprocess.run(
        [sys.executable, __file__, str(iterations), "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    metrics: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return metrics


def _report(label: str, runs: list[dict[str, float]]) -> None:
    def med(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    suffix = f" [{label}]" if label else ""
    ratio = statistics.median(r["loop_us"] / r["hand_us"] for r in runs)
    print(f"iterations:                {int(runs[0]['iterations'])}{suffix}")
    print(f"loop overhead / iteration: {med('loop_us'):.1f} us{suffix}")
    print(f"policy decision / call:    {med('policy_us'):.1f} us{suffix}")
    print(f"fraction in policy:        {med('policy_us') / med('loop_us'):.1%}{suffix}")
    print(f"hand-written loop / iter:  {med('hand_us'):.1f} us{suffix}")
    print(f"ratio agent_loop / hand:   {ratio:.1f}x (goal: <= 3x){suffix}")
    if med("event_us"):
        print(
            f"agent_stream, per event:   {med('event_us'):.2f} us "
            f"({med('events_per_iteration'):.1f} events / iteration){suffix}"
        )
    print(
        f"first tenth / last tenth:  {med('first_tenth_us'):.1f} us / "
        f"{med('last_tenth_us'):.1f} us per iteration{suffix}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("iterations", type=int, nargs="?", default=2000)
    parser.add_argument("--rounds", type=int, default=1, help="fresh processes, medians shown")
    parser.add_argument(
        "--baseline", metavar="SRC", help="another charter's src dir, measured alternately"
    )
    parser.add_argument(
        "--breakdown", action="store_true", help="time each stage of an iteration instead"
    )
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.breakdown:
        breakdown(args.iterations)
        return
    if args.json:
        print(json.dumps(measure(args.iterations)))
        return
    if args.rounds == 1 and not args.baseline:
        _report("", [measure(args.iterations)])
        return
    this: list[dict[str, float]] = []
    base: list[dict[str, float]] = []
    for _ in range(args.rounds):
        this.append(_child(args.iterations, None))
        if args.baseline:
            base.append(_child(args.iterations, os.path.abspath(args.baseline)))
    print(f"medians of {args.rounds} round(s), alternating, one process each")
    _report("this" if args.baseline else "", this)
    if args.baseline:
        _report("baseline", base)


if __name__ == "__main__":
    main()
