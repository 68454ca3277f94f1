"""What the OS sandbox adds to a built-in ``bash`` tool call.

Runs the same command (``true``) through the real ``bash`` tool handler: unsandboxed
(no policy active: plain ``bash --noprofile --norc -c``), sandboxed with the network
off (``network.deny = ["*"]``) with and without the Landlock helper, and sandboxed with
the network through charter's proxy (``network.allow``), bridged by the helper or, without
it, by charter's Python. With the network restricted each sandboxed call also gets the
seccomp filter refusing unix sockets, and bubblewrap reads the environment from a
descriptor. The modes take turns in blocks, so a busy machine slows them alike. Prints
p50 / p99 per mode and the p50 added by the sandbox. Goal: under 15 ms added at p50;
Landlock itself about 1 ms. "without the unix filter" is the same call with the seccomp
filter left out: the difference is what the filter costs.

The workspace is left alone for a second before measuring: the profile builder lists a
directory modified within the last second again on every call (mtimes are too coarse to
trust), which is what an agent that just wrote files pays, not the steady state.

Run: `.venv/bin/python benchmarks/sandbox_overhead.py [--n N] [--files F]`
(``--files``: files in the scratch workspace, which the profile builder scans; ``--git``:
make it a git repository tracking every file, the denied one included, so each receipt
also reports the tracked denied path).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from charter.agent.builtins import builtin_tools
from charter.policy import with_execution_policy
from charter.sandbox import available, bwrap
from charter.sandbox.landlock import build_helper


def landlock_helper(on: bool) -> None:
    """Switch the Landlock helper on or off for the next calls (as without a compiler)."""
    if on:
        os.environ.pop("CHARTER_LANDLOCK", None)
    else:
        os.environ["CHARTER_LANDLOCK"] = "off"
    build_helper(refresh=True)


_FILTER = bwrap.restricted_network_filter


def unix_filter(on: bool) -> None:
    """Switch the unix-socket seccomp filter on or off (off: what the sandbox cost before
    it existed, measured in the same run for the difference it makes)."""
    bwrap.restricted_network_filter = _FILTER if on else (lambda profile: None)


def measure(
    workspace: str, modes: list[tuple[str, dict[str, Any] | None, bool]], n: int
) -> dict[str, list[float]]:
    tool = next(t for t in builtin_tools(workspace) if t.name == "bash")
    times: dict[str, list[float]] = {label: [] for label, _, _ in modes}

    async def one(policy: dict[str, Any] | None) -> float:
        start = time.perf_counter()
        if policy is None:
            result = await tool.handler(command="true")
        else:
            with with_execution_policy(policy, label="bench"):
                result = await tool.handler(command="true")
        elapsed = time.perf_counter() - start
        assert result.get("exit_code") == 0, result
        return elapsed * 1000

    async def go() -> None:
        # Blocks of calls per mode, the blocks taking turns: a busy machine slows every
        # mode alike, and each call still pays what its own mode leaves behind (network
        # namespaces are torn down asynchronously, after the call has returned).
        rounds = 5
        for _ in range(rounds):
            for label, policy, helper in modes:
                landlock_helper(helper)
                unix_filter("without the unix filter" not in label)
                for i in range(n // rounds + 3):
                    elapsed = await one(policy)
                    if i >= 3:  # warm-up
                        times[label].append(elapsed)

    asyncio.run(go())
    landlock_helper(True)
    unix_filter(True)
    return times


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--git", action="store_true", help="a git repository tracking all")
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
        if args.git:
            import subprocess

            for step in (
                ["init", "-q"],
                ["add", "-A"],
                ["-c", "user.name=b", "-c", "user.email=b@example.com", "commit", "-qm", "files"],
            ):
                subprocess.run(["git", *step], cwd=ws, check=True)
        base = {"paths": {"allow": ["./**"], "deny": ["./secrets/**"]}}
        none = {**base, "network": {"deny": ["*"]}}
        proxy = {**base, "network": {"allow": ["example.com"]}}
        modes: list[tuple[str, dict[str, Any] | None, bool]] = [
            ("unsandboxed (no policy)", None, True),
            ("sandboxed, network none", none, True),
            ("  none, without the unix filter", none, True),
            ("  none, without Landlock", none, False),
            ("sandboxed, network proxy", proxy, True),
            ("  proxy, no helper (Python)", proxy, False),
        ]
        time.sleep(1.1)  # see the module docstring
        helper = build_helper()
        print(
            f"bash tool call, `true`, n={args.n}, workspace of {args.files} files"
            + (" (a git repository); " if args.git else "; ")
            + f"Landlock ABI {available().landlock_abi}, helper "
            + (helper.path or f"unavailable ({helper.reason})")
        )
        print(f"{'mode':32} {'p50 ms':>8} {'p99 ms':>8} {'added p50':>10}")
        times = measure(str(ws), modes, args.n)
        baseline = statistics.median(times[modes[0][0]])
        for label, policy, _ in modes:
            p50 = statistics.median(times[label])
            added = "" if policy is None else f"{p50 - baseline:+.1f}"
            print(f"{label:32} {p50:8.1f} {pct(times[label], 0.99):8.1f} {added:>10}")


if __name__ == "__main__":
    main()
