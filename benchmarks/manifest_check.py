"""How long validating a manifest of many personas takes (parse + validate + effective policy).

    .venv/bin/python benchmarks/manifest_check.py [--personas 1000] [--repeat 5]

Target: 1,000 personas well under a second.
"""

from __future__ import annotations

import argparse
import statistics
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
model_policy = {{ default_model = "small", escalation_model = "large" }}
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


def build(n: int, directory: Path) -> Path:
    text = "".join(PERSONA.format(i=i, next=(i + 1) % n, team=i % 7) for i in range(n))
    path = directory / "charter.toml"
    path.write_text(text, encoding="utf-8")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--personas", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = build(args.personas, Path(tmp))
        size = path.stat().st_size
        times: list[float] = []
        policy_times: list[float] = []
        parse_times: list[float] = []
        text = path.read_text(encoding="utf-8")
        for _ in range(args.repeat):
            start = time.perf_counter()
            toml_parser.loads(text)
            parse_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            manifest = load_manifest(path, include_global=False)
            times.append(time.perf_counter() - start)
            start = time.perf_counter()
            for persona in manifest.personas:
                _ = persona.effective_policy
            policy_times.append(time.perf_counter() - start)
            if manifest.errors:
                print(manifest.errors[:3], file=sys.stderr)
                return 1
    print(
        f"personas: {args.personas} ({size / 1024:.0f} KiB of TOML, {args.personas} handoff routes)"
    )
    print(
        f"load + validate: min {min(times) * 1000:.0f} ms, "
        f"median {statistics.median(times) * 1000:.0f} ms over {args.repeat} runs"
    )
    print(f"  of which TOML parsing ({toml_parser.__name__}): min {min(parse_times) * 1000:.0f} ms")
    print(f"effective policies: min {min(policy_times) * 1000:.0f} ms")
    print(f"per persona: {min(times) / args.personas * 1e6:.0f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
