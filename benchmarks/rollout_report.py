"""``charter persona rollout report`` over 1k and 100k recorded runs (issue 18: < 50 ms).

The log holds ``persona.run.recorded`` events (two cohorts, shadow proposals with their
``persona.rollout.agreement``) spread over 60 days, appended in batches the way runs
append them. The report reads the evidence snapshot plus its tail, so its cost should
stay flat as the log grows. Baseline in the same run: a full replay of the log into the
same numbers (what a report without the projection would cost).
"""

from __future__ import annotations

import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from tempfile import TemporaryDirectory

from charter.manifest import load_manifest
from charter.run import evidence, promotion
from charter.runtime import NewEvent, open_event_log

AT = datetime(2026, 9, 1, tzinfo=UTC)
MANIFEST = """
[[personas]]
name = "reviewer"
description = "bench"
entry_workflow = "w.py:run"
tools = ["github"]
autonomy_tier = "act_with_approval"
receipt_policy = "required"
triggers = ["github.review_requested"]
rollout_policy = { mode = "shadow", cohorts = ["repository:acme/api", "repository:acme/web"], \
promotion = { min_runs = 50, min_agreement = 0.6, window = "30d" } }
"""


def record(i: int) -> list[NewEvent]:
    at = AT + timedelta(minutes=i * 60 * 24 * 60 // RUNS)
    repo = ("acme/api", "acme/web")[i % 2]
    key = f"github:{repo}:pr:{i}"
    run = f"run_{i}"
    rec = {
        "run_id": run,
        "status": "completed",
        "work_key": key,
        "autonomy": {
            "effective": "shadow",
            "arm": "rollout",
            "rollout": {"cohort": f"repository:{repo}"},
        },
        "denied": [{"tool": "read"}] if i % 17 == 0 else [],
        "budget": {"run_usd": 0.002},
        "dry_runs": [{"tool": "github", "arguments": {"action": "approve"}}],
        "proposals": [],
        "approvals": [],
        "result": None,
    }
    out = [NewEvent("reviewer", "persona.run.recorded", at, {"run_id": run, "record": rec})]
    out.append(
        NewEvent(
            "reviewer",
            "persona.rollout.agreement",
            at + timedelta(minutes=1),
            {
                "run_id": run,
                "work_key": key,
                "agree": i % 10 != 0,
                "run_day": at.strftime("%Y-%m-%d"),
                "epoch": 0,
                "arm": "rollout",
                "tier": "shadow",
                "cohort": f"repository:{repo}",
                "cost_usd": 0.002,
            },
        )
    )
    return out


RUNS = 0


def main() -> None:
    global RUNS
    with TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "charter.toml").write_text(MANIFEST)
        (root / "w.py").write_text("def run(ctx):\n    return None\n")
        persona = load_manifest(str(root)).personas[0]
        for runs in (1_000, 100_000):
            RUNS = runs
            log = open_event_log(state_dir=root / f"state{runs}")
            batch: list[NewEvent] = []
            for i in range(runs):
                batch.extend(record(i))
                if len(batch) >= 10_000:
                    log.append(batch)
                    batch = []
            log.append(batch)
            now = AT + timedelta(days=61)
            evidence.load(log, "reviewer")  # the first read folds the log into a snapshot
            samples = []
            for _ in range(50):
                start = time.perf_counter()
                promotion.report(persona, evidence.load(log, "reviewer"), now)
                samples.append((time.perf_counter() - start) * 1000)
            samples.sort()
            start = time.perf_counter()
            replayed = evidence.rebuild(log, "reviewer")
            promotion.report(persona, replayed, now)
            replay_ms = (time.perf_counter() - start) * 1000
            print(
                f"rollout report over {runs:>7,} runs ({log.last_event_id():>7,} events): "
                f"p50 {statistics.median(samples):6.2f} ms, p95 "
                f"{samples[int(len(samples) * 0.95)]:6.2f} ms; full replay {replay_ms:9.1f} ms"
            )
            log.close()


if __name__ == "__main__":
    main()
