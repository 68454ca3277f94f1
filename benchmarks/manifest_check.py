"""How long `charter persona check` of many personas takes, against parsing the same file.

    .venv/bin/python benchmarks/manifest_check.py [--personas 1000] [--repeat 5] [--no-bytecode]

Two measurements on one generated manifest (1,000 rich personas: stages, policies, eval
packs, a handoff route each):

- **whole processes**, alternated in the same run: ``charter persona check FILE`` against
  ``python -c "tomllib.loads(...)"`` (the stdlib parser alone, its own process). Goal
  (issue 36): the check's median at most 1.5x the parse's, or under 0.5 s. Each kind of
  warning must be printed once (the generated routes all carry the same unreachable rule).
- **in process**: load + validate, of which TOML parsing, and the effective policies.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from charter.manifest import load_manifest
from charter.manifest.source_text import toml_parser

PERSONA = """\
[[personas]]
name = "persona_{i}"
version = "0.1.0"
description = "Synthetic persona {i}."
owner = "team-{team}"
entry_workflow = "workflows.persona:run"
tools = ["github", "ci", "read", "grep", "bash"]
capabilities = ["git.get_diff", "project.test_commands", "process.exec"]
autonomy_tier = "act_with_approval"
receipt_policy = "required"
triggers = ["github.pr_opened", "github.check_failed"]
schedules = ["*/30 * * * *", "0 9 * * 1-5"]
handoffs = ["persona_{next}", "human:maintainers"]
context_packs = ["repo_policy", "release_rules"]
evals = ["merge_safety"]
budget = {{ daily_usd = 20.0, hourly_usd = 5.0, run_usd = 1.0, max_tokens = 100000 }}
model_policy = {{ default_model = "small", escalation_model = "large", reasoning_effort = "low" }}
rollout_policy = {{ mode = "approval_only", percentage = 25 }}
stages = [
  {{ name = "classify", allowed_tools = ["github", "ci"], side_effect_level = "read_only" }},
  {{ name = "act", allowed_tools = ["github", "bash"], on_exit = {{ on_failure = "classify" }} }},
]
policy = {{ paths = {{ allow = ["./"], deny = ["./secrets/**"] }}, network = ["api.github.com"] }}

[[handoff_routes]]
id = "route_{i}"
from = "persona_{i}"
route = [{{ target = "persona_{next}" }}, {{ target = "human:ops", when = "budget_exhausted" }}]
"""

PARSE_ONLY = "import sys, tomllib; tomllib.loads(open(sys.argv[1], encoding='utf-8').read())"


def build(n: int, directory: Path) -> Path:
    """``charter.toml`` with ``n`` personas, and the eval file they name."""
    text = "".join(PERSONA.format(i=i, next=(i + 1) % n, team=i % 7) for i in range(n))
    path = directory / "charter.toml"
    path.write_text(text, encoding="utf-8")
    (directory / "evals").mkdir(exist_ok=True)
    (directory / "evals" / "merge_safety.toml").write_text('name = "merge_safety"\n')
    return path


#: CPU seconds (user + system) of each timed child process, by label: on a shared machine
#: the wall time also holds the waits for a core, the CPU time does not.
CPU: dict[str, list[float]] = {"check": [], "parse": []}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(
    argv: list[str], env: dict[str, str] | None = None, label: str | None = None
) -> tuple[float, subprocess.CompletedProcess[str]]:
    cpu = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    elapsed = time.perf_counter() - start
    if label is not None:
        CPU[label].append(_children_cpu() - cpu)
    return elapsed, proc


def process_env(pycache: Path, *, bytecode: bool) -> dict[str, str]:
    """The processes' environment: as installed, Python caches its bytecode (here in
    ``pycache``); the stdlib's ``tomllib`` has its bytecode either way. Without it (this
    machine sets PYTHONDONTWRITEBYTECODE=1) every charter process compiles its modules."""
    env = dict(os.environ)
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def whole_processes(
    path: Path, repeat: int, env: dict[str, str]
) -> tuple[list[float], list[float], str]:
    """Alternated wall times of the check and of the parse alone; the check's stderr.

    One untimed run of each first (it writes the bytecode caches when they are on)."""
    check_times: list[float] = []
    parse_times: list[float] = []
    stderr = ""
    _timed([sys.executable, "-m", "charter", "persona", "check", str(path)], env)
    _timed([sys.executable, "-c", PARSE_ONLY, str(path)], env)
    for _ in range(repeat):
        elapsed, proc = _timed(
            [sys.executable, "-m", "charter", "persona", "check", str(path)], env, "check"
        )
        if proc.returncode != 0:
            raise SystemExit(f"persona check failed ({proc.returncode}):\n{proc.stderr[:2000]}")
        check_times.append(elapsed)
        stderr = proc.stderr
        elapsed, proc = _timed([sys.executable, "-c", PARSE_ONLY, str(path)], env, "parse")
        if proc.returncode != 0:
            raise SystemExit(f"tomllib failed:\n{proc.stderr[:2000]}")
        parse_times.append(elapsed)
    return check_times, parse_times, stderr


def in_process(path: Path, repeat: int) -> tuple[list[float], list[float], list[float]]:
    parser = toml_parser()
    text = path.read_text(encoding="utf-8")
    times: list[float] = []
    policy_times: list[float] = []
    parse_times: list[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        parser.loads(text)
        parse_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        manifest = load_manifest(path, include_global=False)
        times.append(time.perf_counter() - start)
        if manifest.errors:
            raise SystemExit("\n".join(str(e) for e in manifest.errors[:3]))
        start = time.perf_counter()
        for persona in manifest.personas:
            _ = persona.effective_policy
        policy_times.append(time.perf_counter() - start)
    return times, parse_times, policy_times


def _ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:.0f} ms (min {min(values) * 1000:.0f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--personas", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--no-bytecode",
        action="store_true",
        help="time the processes with PYTHONDONTWRITEBYTECODE=1 (every run compiles charter)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = build(args.personas, Path(tmp))
        size = path.stat().st_size
        env = process_env(Path(tmp) / "pycache", bytecode=not args.no_bytecode)
        check, parse, stderr = whole_processes(path, args.repeat, env)
        times, in_parse, policies = in_process(path, args.repeat)
    warning_lines = [line for line in stderr.splitlines() if line.startswith("warning:")]
    ratio = statistics.median(check) / statistics.median(parse)
    print(f"personas: {args.personas} ({size / 1024:.0f} KiB of TOML, {args.personas} routes)")
    caches = "without bytecode caches" if args.no_bytecode else "with bytecode caches"
    print(f"whole processes ({caches}), alternated, {args.repeat} runs each:")
    print(f"  charter persona check: {_ms(check)}")
    print(f"  tomllib parse alone:   {_ms(parse)}")
    print(f"  ratio (medians): {ratio:.2f}x (goal <= 1.5x, or the check under 0.5 s)")
    cpu_ratio = statistics.median(CPU["check"]) / statistics.median(CPU["parse"])
    print(
        f"  CPU time: check {_ms(CPU['check'])}, tomllib {_ms(CPU['parse'])}, "
        f"ratio {cpu_ratio:.2f}x"
    )
    print(f"  warning lines printed: {len(warning_lines)}")
    for line in warning_lines:
        print(f"    {line[:150]}")
    print("in process:")
    print(f"  load + validate: {_ms(times)}")
    print(f"    of which TOML parsing ({toml_parser().__name__}): {_ms(in_parse)}")
    print(f"  effective policies: {_ms(policies)}")
    print(f"  per persona: {min(times) / args.personas * 1e6:.0f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
