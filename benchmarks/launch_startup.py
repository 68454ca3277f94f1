"""How long ``charter launch`` takes to get to the point where it starts the tool.

    .venv/bin/python benchmarks/launch_startup.py [--runs 30]

Measures, as separate processes (the real console script, a persona folder with a policy,
overlay, MCP servers and user arguments to filter):

* ``charter launch claude rev --dry-run -- -p hi --permission-mode bypassPermissions``
* ``charter print-policy claude rev``
* ``charter launch claude rev --run-mode swap -- -p hi`` with a stand-in ``claude`` that
  exits at once (so: plan + temp files + swap + fork/exec + restore + cleanup)
* ``charter --version`` and ``charter --help`` (answered without importing click; goal:
  under 3x ``python -c pass``),
* ``python -c pass`` for reference,

the first three with the launch cache (the usual case: nothing changed since the last
launch), then the first two again with ``CHARTER_LAUNCH_CACHE=0`` (a changed persona).

Target: under 80 ms median for the first two (a bash launcher doing the same job takes
about 120 ms). Medians of wall-clock times; the machine is shared, so look at the minimum
too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

POLICY = {
    "defaults": {"claude": ["--model", "sonnet"]},
    "mcpServers": {"alpha": {"command": "python3", "args": ["srv.py"]}},
    "policy": {
        "tools": {
            "allow": ["bash", "read", "edit", "write", "glob", "grep", "alpha__*"],
            "deny": ["webfetch"],
        },
        "paths": {"deny": ["~/.ssh", "./secrets/**"]},
        "bash": {"allow": ["git:*", "npm:*"], "deny": ["curl:*", "wget:*"]},
        "network": {"deny": ["*"]},
    },
}


def _setup(root: Path) -> tuple[Path, dict[str, str]]:
    repo = root / "repo"
    (repo / ".git").mkdir(parents=True)
    persona = repo / ".personas" / "rev"
    persona.mkdir(parents=True)
    (persona / "AGENTS.md").write_text('You are {{persona}}.\n<!-- include {"file": "x.md"} -->\n')
    (persona / "x.md").write_text("Be careful.\n")
    (persona / "persona.json").write_text(json.dumps(POLICY))
    shared = repo / ".personas" / ".shared"
    shared.mkdir()
    (shared / "meta.AGENTS.md").write_text("Repo-wide rules.\n")
    bindir = root / "bin"
    bindir.mkdir()
    fake = bindir / "claude"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    past = time.time() - 3600  # the launch cache ignores files changed in the last seconds
    for path in [root, *root.rglob("*")]:
        os.utime(path, (past, past), follow_symlinks=False)
    env = dict(os.environ)
    env["HOME"] = str(root / "home")
    env["XDG_STATE_HOME"] = str(root / "state")
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    env.pop("CHARTER_PERSONA_PATHS", None)
    # what a user runs: cached bytecode (a shell with PYTHONDONTWRITEBYTECODE=1 would time
    # compiling every module from source, ~100 ms more on the sandboxed launch path)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return repo, env


def _time(cmd: list[str], cwd: Path, env: dict[str, str], runs: int) -> list[float]:
    subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, check=True)  # warm caches
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, check=True)
        out.append((time.perf_counter() - start) * 1000)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    charter = str(Path(sys.executable).with_name("charter"))
    with tempfile.TemporaryDirectory() as tmp:
        repo, env = _setup(Path(tmp))
        nocache = {**env, "CHARTER_LAUNCH_CACHE": "0"}
        cases = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "charter --version": [charter, "--version"],
            "charter --help": [charter, "--help"],
            "launch --dry-run": [
                charter,
                "launch",
                "claude",
                "rev",
                "--dry-run",
                "--",
                "-p",
                "hi",
                "--permission-mode",
                "bypassPermissions",
            ],
            "print-policy": [charter, "print-policy", "claude", "rev"],
            "launch (swap, tool exits at once)": [
                charter,
                "launch",
                "claude",
                "rev",
                "--run-mode",
                "swap",
                "--",
                "-p",
                "hi",
            ],
        }
        # the persona's network and path rules put claude in charter's sandbox by default
        cases["launch (swap, --sandbox never)"] = [
            *cases["launch (swap, tool exits at once)"][:6],
            "--sandbox",
            "never",
            *cases["launch (swap, tool exits at once)"][6:],
        ]
        print(f"{'case':<36} {'median':>8} {'min':>8} {'max':>8}  (ms, {args.runs} runs)")
        cases_nocache = {
            "launch --dry-run (no cache)": cases["launch --dry-run"],
            "print-policy (no cache)": cases["print-policy"],
        }
        runs = [(n, c, env) for n, c in cases.items()]
        runs += [(n, c, nocache) for n, c in cases_nocache.items()]
        medians: dict[str, float] = {}
        for name, cmd, case_env in runs:
            times = _time(cmd, repo, case_env, args.runs)
            medians[name] = statistics.median(times)
            print(f"{name:<36} {medians[name]:8.1f} {min(times):8.1f} {max(times):8.1f}")
        added = (
            medians["launch (swap, tool exits at once)"] - medians["launch (swap, --sandbox never)"]
        )
        print(f"the sandbox adds {added:.1f} ms to a launch (goal: at most 20 ms)")
        bare = medians["python -c pass"]
        for name in ("charter --version", "charter --help"):
            print(f"{name} / python -c pass: {medians[name] / bare:.2f}x (goal: under 3x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
