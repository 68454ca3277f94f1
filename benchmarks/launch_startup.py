"""How long ``charter launch`` takes to get to the point where it starts the tool.

    .venv/bin/python benchmarks/launch_startup.py [--runs 30]

Measures, as separate processes (the real console script, a persona folder with a policy,
overlay, MCP servers and user arguments to filter):

* ``charter launch claude rev --dry-run -- -p hi --permission-mode bypassPermissions``
* ``charter print-policy claude rev``
* ``charter launch claude rev --run-mode swap -- -p hi`` with a stand-in ``claude`` that
  exits at once (so: plan + temp files + swap + fork/exec + restore + cleanup), in
  charter's sandbox (the persona's rules ask for it) and with ``--sandbox never``; the
  same in ``unshare`` mode (the default; the fair comparison for the sandbox, which binds
  the overlay the same way, while swap mode fsyncs a journal)
* ``charter --version`` and ``charter --help`` (answered without importing click; goal:
  under 3x ``python -c pass``),
* ``python -c pass``, ``python -c "import charter"`` and the imports of a cold
  ``print-policy`` (the click group, the launch command, the plan), for reference,

the first three with the launch cache (the usual case: nothing changed since the last
launch), then the first two again with ``CHARTER_LAUNCH_CACHE=0`` (a changed persona).

Target: under 80 ms median for the first two (a bash launcher doing the same job takes
about 120 ms). Medians of wall-clock times; the machine is shared, so look at the minimum
too.

``--baseline SRC`` (the ``src`` directory of another charter checkout, e.g. from
``git archive <commit> src | tar -x -C /tmp/old``) times that code too, run for run
alternating with this one (``PYTHONPATH=SRC`` in front of the installed package), so a
before/after comparison sees the same machine load.
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


def _time(cmd: list[str], cwd: Path, envs: list[dict[str, str]], runs: int) -> list[list[float]]:
    """``runs`` timings of ``cmd`` under each of ``envs``, the envs alternating run by run."""
    for env in envs:  # warm caches
        subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, check=True)
    out: list[list[float]] = [[] for _ in envs]
    for _ in range(runs):
        for env, times in zip(envs, out, strict=True):
            start = time.perf_counter()
            subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, check=True)
            times.append((time.perf_counter() - start) * 1000)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument(
        "--baseline", metavar="SRC", help="another charter's src dir, timed alternately"
    )
    parser.add_argument(
        "--only", metavar="TEXT", help="time only the cases whose name contains TEXT"
    )
    args = parser.parse_args()
    charter = str(Path(sys.executable).with_name("charter"))
    with tempfile.TemporaryDirectory() as tmp:
        repo, env = _setup(Path(tmp))
        nocache = {**env, "CHARTER_LAUNCH_CACHE": "0"}
        cases = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "python -c 'import charter'": [sys.executable, "-c", "import charter"],
            # what a cold print-policy imports before it computes anything
            "imports of a cold print-policy": [
                sys.executable,
                "-c",
                "import charter.cli._group, charter.cli.launch_cmd, charter.launch.plan, "
                "charter.launch.render",
            ],
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
        # the default run mode: a sandboxed launch binds the overlay with bubblewrap, an
        # unsandboxed one with unshare (swap mode fsyncs its journal: tens of ms of disk)
        cases["launch (unshare, tool exits at once)"] = [
            charter, "launch", "claude", "rev", "--run-mode", "unshare", "--", "-p", "hi"
        ]  # fmt: skip
        cases["launch (unshare, --sandbox never)"] = [
            *cases["launch (unshare, tool exits at once)"][:6],
            "--sandbox",
            "never",
            *cases["launch (unshare, tool exits at once)"][6:],
        ]
        labels = ["this"] + (["baseline"] if args.baseline else [])
        width = 36 + (10 if args.baseline else 0)
        print(f"{'case':<{width}} {'median':>8} {'min':>8} {'max':>8}  (ms, {args.runs} runs)")
        cases_nocache = {
            "launch --dry-run (no cache)": cases["launch --dry-run"],
            "print-policy (no cache)": cases["print-policy"],
        }
        runs = [(n, c, env) for n, c in cases.items()]
        runs += [(n, c, nocache) for n, c in cases_nocache.items()]
        if args.only:
            runs = [r for r in runs if args.only in r[0]]
        medians: dict[str, dict[str, float]] = {label: {} for label in labels}
        for name, cmd, case_env in runs:
            envs = [case_env]
            if args.baseline:
                old_path = os.pathsep.join(filter(None, [args.baseline, env.get("PYTHONPATH")]))
                envs.append({**case_env, "PYTHONPATH": old_path})
            for label, times in zip(labels, _time(cmd, repo, envs, args.runs), strict=True):
                medians[label][name] = statistics.median(times)
                shown = f"{name} [{label}]" if args.baseline else name
                print(
                    f"{shown:<{width}} {medians[label][name]:8.1f} {min(times):8.1f} "
                    f"{max(times):8.1f}"
                )
        for label in labels:
            m = medians[label]
            if args.only:
                continue  # the ratios need every case
            suffix = f" [{label}]" if args.baseline else ""
            for mode in ("unshare", "swap"):
                added = (
                    m[f"launch ({mode}, tool exits at once)"]
                    - m[f"launch ({mode}, --sandbox never)"]
                )
                print(
                    f"the sandbox adds {added:.1f} ms to a launch in {mode} mode "
                    f"(goal: at most 20 ms){suffix}"
                )
            bare = m["python -c pass"]
            for name in ("charter --version", "charter --help"):
                print(f"{name} / python -c pass: {m[name] / bare:.2f}x (goal: under 3x){suffix}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
