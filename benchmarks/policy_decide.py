"""Policy decision speed: a 3-frame stack with 50 rules per frame.

Prints decisions per second and median / p99 latency for a tool-only check and for a
path + command check. Run: `.venv/bin/python benchmarks/policy_decide.py [--n N]`.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable

from charter.policy import (
    Frame,
    Policy,
    ToolAnnotations,
    ToolCall,
    builtin_annotations,
    decide,
    make_context,
)


def build_stack() -> list[Frame]:
    frames = []
    for f in range(3):
        tools = (
            [f"tool_{f}_{i}" for i in range(40)]
            + [f"srv{i}__*" for i in range(8)]
            + ["bash", "read"]
        )
        deny = [f"danger_{f}_{i}*" for i in range(50)]
        paths = [f"./dir{i}" for i in range(45)] + [
            "./src",
            "./tests",
            "/tmp",
            "~/cache",
            "./docs/**",
        ]
        path_deny = [f"./dir{i}/private/**" for i in range(48)] + ["./secrets/**", "*.bak"]
        cmds = [f"tool{i}:*" for i in range(46)] + ["git:*", "npm test", "pytest:*", "tee:*"]
        cmd_deny = [f"bad{i}:*" for i in range(47)] + ["rm -rf:*", "git push --force:*", "curl:*"]
        policy = Policy.from_dict(
            {
                "tools": {"allow": tools, "deny": deny},
                "side_effect_level": "process_exec",
                "paths": {"allow": paths, "deny": path_deny},
                "commands": {"allow": cmds, "deny": cmd_deny},
            }
        )
        frames.append(Frame(policy, f"frame{f}"))
    return frames


def measure(label: str, fn: Callable[[], bool], n: int) -> None:
    for _ in range(min(n, 2000)):  # warm caches and compiled matchers
        fn()
    samples = []
    clock = time.perf_counter_ns
    for _ in range(n):
        start = clock()
        fn()
        samples.append(clock() - start)
    samples.sort()
    median = statistics.median(samples) / 1000
    p99 = samples[int(len(samples) * 0.99) - 1] / 1000
    total_s = sum(samples) / 1e9
    print(
        f"{label:<34} {n / total_s:>12,.0f} decisions/s   "
        f"median {median:7.2f} µs   p99 {p99:7.2f} µs"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=50_000)
    args = parser.parse_args()
    stack = build_stack()
    ctx = make_context(tempfile.mkdtemp(prefix="charter-bench-"))

    tool_only = ToolCall(
        "read", {}, ToolAnnotations(side_effect_level=builtin_annotations("read").side_effect_level)
    )  # type: ignore[union-attr]
    assert decide(tool_only, stack, context=ctx).allowed
    denied_tool = ToolCall("danger_2_7x", {}, ToolAnnotations())
    assert decide(denied_tool, stack, context=ctx).denied
    path_cmd = ToolCall(
        "bash",
        {"command": "cd src && pytest -q tests/test_x.py | tee out.log", "cwd": "src/pkg"},
        ToolAnnotations(
            side_effect_level=builtin_annotations("bash").side_effect_level,  # type: ignore[union-attr]
            kind="execute",
            command_args=("command",),
            read_path_args=("cwd",),
        ),
    )
    d = decide(path_cmd, stack, context=ctx)
    assert d.allowed, d.reason

    print("charter.policy decide(): 3 frames x 50 rules per dimension")
    measure("tool-only (allowed)", lambda: decide(tool_only, stack, context=ctx).allowed, args.n)
    measure(
        "tool-only (denied, with receipt)",
        lambda: decide(denied_tool, stack, context=ctx).allowed,
        args.n,
    )
    measure(
        "path + command (allowed)",
        lambda: decide(path_cmd, stack, context=ctx).allowed,
        args.n // 5,
    )


if __name__ == "__main__":
    main()
