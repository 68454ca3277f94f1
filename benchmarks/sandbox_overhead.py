"""What the OS sandbox adds to a built-in ``bash`` tool call.

Runs the same command (``true``) through the real ``bash`` tool handler: unsandboxed
(no policy active: plain ``bash --noprofile --norc -c``), sandboxed with the network
off (``network.deny = ["*"]``), and sandboxed with the network through charter's proxy
(``network.allow``: the proxy starts and stops on every call). Prints p50 / p99 per
mode and the p50 added by the sandbox. Goal: under 15 ms added at p50.

Run: `.venv/bin/python benchmarks/sandbox_overhead.py [--n N] [--files F]`
(``--files``: files in the scratch workspace, which the profile builder scans).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from charter.agent.builtins import builtin_tools
from charter.policy import with_execution_policy
from charter.sandbox import available


def measure(workspace: str, policy: dict[str, Any] | None, n: int) -> list[float]:
    tool = next(t for t in builtin_tools(workspace) if t.name == "bash")

    async def go() -> list[float]:
        times = []
        for i in range(n + 3):
            start = time.perf_counter()
            if policy is None:
                result = await tool.handler(command="true")
            else:
                with with_execution_policy(policy, label="bench"):
                    result = await tool.handler(command="true")
            elapsed = time.perf_counter() - start
            assert result.get("exit_code") == 0, result
            if i >= 3:  # warm-up
                times.append(elapsed * 1000)
        return times

    return asyncio.run(go())


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--files", type=int, default=500)
    args = parser.parse_args()
    info = available()
    if not info.ok:
        raise SystemExit("no sandbox here: " + "; ".join(info.reasons))
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        for i in range(args.files):
            sub = ws / f"pkg{i % 20}"
            sub.mkdir(exist_ok=True)
            (sub / f"mod{i}.py").write_text("x = 1\n")
        (ws / "secrets").mkdir()
        (ws / "secrets" / "token").write_text("t")
        base = {"paths": {"allow": ["./**"], "deny": ["./secrets/**"]}}
        modes: list[tuple[str, dict[str, Any] | None]] = [
            ("unsandboxed (no policy)", None),
            ("sandboxed, network none", {**base, "network": {"deny": ["*"]}}),
            ("sandboxed, network proxy", {**base, "network": {"allow": ["example.com"]}}),
        ]
        print(f"bash tool call, `true`, n={args.n}, workspace of {args.files} files")
        print(f"{'mode':28} {'p50 ms':>8} {'p99 ms':>8} {'added p50':>10}")
        baseline = None
        for label, policy in modes:
            times = measure(str(ws), policy, args.n)
            p50 = statistics.median(times)
            baseline = p50 if baseline is None else baseline
            added = "" if policy is None else f"{p50 - baseline:+.1f}"
            print(f"{label:28} {p50:8.1f} {pct(times, 0.99):8.1f} {added:>10}")


if __name__ == "__main__":
    main()
