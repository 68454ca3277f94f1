"""How long one write transaction holds the log's lock on PostgreSQL (issue 36).

One process runs write transactions shaped like a webhook's admission (the persona's
state read with the lock's first round trip, then three events appended and committed),
with nobody else waiting, and times each from the moment its first round trip returned
(the lock is held from before then) to the moment its COMMIT returned: the shortest hold
a writer of this design gets, so ``1 / hold`` is the most write transactions a second one
log admits, whatever the number of hosts. ``--baseline DIR`` runs the same in a child
process on that code first (``git archive <commit> src | tar -x -C /tmp/base``, then
``/tmp/base/src``), alternating rounds, so both see the same machine.

    python benchmarks/runtime_lock_hold.py [--transactions 2000] [--rounds 3]
        [--personas 8] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from runtime_common import PG_BASE


def measure(transactions: int, personas: int) -> dict[str, float]:
    """Hold times of ``transactions`` write transactions (in this process's code)."""
    from charter.runtime import NewEvent, PostgresEventLog
    from charter.runtime.log import Prefetch

    url = f"{PG_BASE}?schema=charter_hold_{uuid.uuid4().hex[:10]}"
    log = PostgresEventLog(url)
    at = datetime(2026, 11, 28, tzinfo=UTC)
    holds: list[float] = []
    try:
        for i in range(transactions + 50):
            persona = f"worker{i % personas}"
            ahead = Prefetch(persona, 2, 64, work_keys=(f"k{i}",))
            with log.write(prefetch=ahead) as txn:
                held = time.perf_counter()  # the first round trip (with the lock) returned
                txn.load_persona(persona, 2, 64)
                txn.completions(persona, [f"k{i}"])
                txn.append(
                    [
                        NewEvent(persona, "persona.trigger.received", at, {"work_key": f"k{i}"}),
                        NewEvent(persona, "persona.lease.acquired", at, {"lease_id": f"l{i}"}),
                        NewEvent(persona, "persona.run.started", at, {"run_id": f"r{i}"}),
                    ]
                )
            if i >= 50:  # (the first ones prepare statements)
                holds.append(time.perf_counter() - held)
    finally:
        log.drop_schema()
        log.close()
    holds.sort()
    return {
        "p50_ms": holds[len(holds) // 2] * 1000,
        "p90_ms": holds[int(len(holds) * 0.9)] * 1000,
        "mean_ms": sum(holds) / len(holds) * 1000,
    }


def child(code: str | None, transactions: int, personas: int) -> dict[str, float]:
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join([code, str(Path(__file__).parent)])
    argv = [sys.executable, __file__, "--child", "--transactions", str(transactions),
            "--personas", str(personas)]  # fmt: skip
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
    result: dict[str, float] = json.loads(out.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transactions", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--personas", type=int, default=8)
    parser.add_argument("--baseline", help="a directory holding the baseline's charter package")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.transactions, args.personas)))
        return
    codes: list[tuple[str, str | None]] = [("this tree", None)]
    if args.baseline:
        if not (Path(args.baseline) / "charter" / "__init__.py").is_file():
            parser.error(f"--baseline {args.baseline}: no charter package there")
        codes = [("baseline", str(Path(args.baseline).resolve())), ("this tree", None)]
    print(f"{args.transactions} write transactions over {args.personas} persona(s), "
          "one writer: lock hold per transaction (ms) and the ceiling it implies")  # fmt: skip
    for round_ in range(args.rounds):
        for label, code in codes:
            r = child(code, args.transactions, args.personas)
            print(f"round {round_ + 1} {label:10s} hold p50 {r['p50_ms']:6.3f}  p90 "
                  f"{r['p90_ms']:6.3f}  mean {r['mean_ms']:6.3f}  -> at most "
                  f"{1000 / r['mean_ms']:6.0f} write txns/s per log")  # fmt: skip


if __name__ == "__main__":
    main()
