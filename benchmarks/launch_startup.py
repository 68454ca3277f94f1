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

The peer: ``print-policy`` (with and without the cache) is timed run for run alternating
with agent-persona's launcher (bash) printing the policy of the same persona, and the
ratios charter/peer are printed (goal: at most 0.5x, with and without the cache).
agent-persona itself is not available offline, so the default peer is
``benchmarks/peer/agent_persona_print_policy.sh``, a reconstruction of its
``print-policy claude <persona>`` path from seed 004 (bash plus one ``python3`` helper
per policy question: nine interpreter starts for this persona); ``--peer SCRIPT`` times
another one (called as ``SCRIPT claude rev`` in the repo), ``--peer none`` skips it. The
peer's ``python3`` is the interpreter charter runs on (see ``_peer_env``).

``--agent-persona PATH`` (or ``$CHARTER_BENCH_AGENT_PERSONA``) times the **real**
agent-persona instead (GoodFarming/agent-persona, MIT; a copy is in
``../shared/peers/agent-persona``), run as ``PATH print-policy claude rev``: the
reconstruction starts ``python3`` nine times where the real tool starts it four times,
so it is about twice as slow and flatters charter.

Medians of wall-clock times; the machine is shared, so look at the minimum too.

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


# agent-persona's launcher itself is not available offline: benchmarks/peer has a
# reconstruction of its print-policy path from seed 004 (see that script's header)
PEER = Path(__file__).with_name("peer") / "agent_persona_print_policy.sh"


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


def _time(
    variants: list[tuple[list[str], dict[str, str]]], cwd: Path, runs: int
) -> list[list[float]]:
    """``runs`` timings of each (command, env) variant, the variants alternating run by run."""
    for cmd, env in variants:  # warm caches
        subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, check=True)
    out: list[list[float]] = [[] for _ in variants]
    for _ in range(runs):
        for (cmd, env), times in zip(variants, out, strict=True):
            start = time.perf_counter()
            subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, check=True)
            times.append((time.perf_counter() - start) * 1000)
    return out


def _peer_env(env: dict[str, str], root: Path) -> dict[str, str]:
    """The peer's env: the ``python3`` it finds first on PATH is the interpreter charter runs on.

    The peer starts one ``python3`` per policy question, so what that costs decides the
    comparison. A version manager's shim (pyenv's is a bash script), or a base interpreter
    whose site-packages run ``.pth`` files at each start (this machine's adds ~20 ms),
    would charge the peer for what charter does not pay; charter's own venv interpreter
    (the directory of ``sys.executable``) is the fair one.
    """
    bindir = Path(sys.executable).parent
    if not (bindir / "python3").exists():
        bindir = root / "peer-bin"
        bindir.mkdir(exist_ok=True)
        (bindir / "python3").symlink_to(sys.executable)
    return {**env, "PATH": f"{bindir}{os.pathsep}{env['PATH']}"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument(
        "--baseline", metavar="SRC", help="another charter's src dir, timed alternately"
    )
    parser.add_argument(
        "--only", metavar="TEXT", help="time only the cases whose name contains TEXT"
    )
    parser.add_argument(
        "--peer",
        metavar="SCRIPT",
        default=str(PEER),
        help="agent-persona's launcher, run as SCRIPT claude rev, timed alternately with "
        "print-policy (default: the reconstruction in benchmarks/peer; 'none' to skip)",
    )
    parser.add_argument(
        "--agent-persona",
        metavar="PATH",
        default=os.environ.get("CHARTER_BENCH_AGENT_PERSONA"),
        help="the real agent-persona launcher (run as PATH print-policy claude rev) as the "
        "peer; default $CHARTER_BENCH_AGENT_PERSONA",
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
        width = 40 + (10 if args.baseline else 0)
        print(f"{'case':<{width}} {'median':>8} {'min':>8} {'max':>8}  (ms, {args.runs} runs)")
        cases_nocache = {
            "launch --dry-run (no cache)": cases["launch --dry-run"],
            "print-policy (no cache)": cases["print-policy"],
        }
        runs = [(n, c, env) for n, c in cases.items()]
        runs += [(n, c, nocache) for n, c in cases_nocache.items()]
        if args.only:
            runs = [r for r in runs if args.only in r[0]]
        # run in the persona's repository: a relative --peer is taken from here
        peer_cmd = [str(Path(args.peer).resolve()), "claude", "rev"]
        if args.agent_persona:
            peer_cmd = [str(Path(args.agent_persona).resolve()), "print-policy", "claude", "rev"]
        peer_env = _peer_env(env, Path(tmp))
        medians: dict[str, dict[str, float]] = {label: {} for label in labels}
        peer: dict[str, float] = {}
        for name, cmd, case_env in runs:
            variants = [(cmd, case_env)]
            if args.baseline:
                old_path = os.pathsep.join(filter(None, [args.baseline, env.get("PYTHONPATH")]))
                variants.append((cmd, {**case_env, "PYTHONPATH": old_path}))
            # the peer has no cache: it runs alongside both print-policy cases
            with_peer = name.startswith("print-policy") and args.peer != "none"
            if with_peer:
                variants.append((peer_cmd, peer_env))
            timings = _time(variants, repo, args.runs)
            timed = [*labels, "peer"] if with_peer else labels
            for label, times in zip(timed, timings, strict=True):
                median = statistics.median(times)
                if label == "peer":
                    peer[name] = median
                    shown = f"{name} [agent-persona]"
                else:
                    medians[label][name] = median
                    shown = f"{name} [{label}]" if args.baseline else name
                print(f"{shown:<{width}} {median:8.1f} {min(times):8.1f} {max(times):8.1f}")
        for label in labels:
            m = medians[label]
            suffix = f" [{label}]" if args.baseline else ""
            for name, peer_median in peer.items():
                print(
                    f"{name} / agent-persona print-policy (same run): "
                    f"{m[name] / peer_median:.2f}x (goal: at most 0.5x){suffix}"
                )
            if args.only:
                continue  # the other ratios need every case
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
