"""``status`` latency with 1k and 100k events in the log (1M with ``--million``).

The log is filled with batched raw appends for many personas plus real runtime ticks for
the measured persona, whose snapshot is kept current by the runtime. Status reads one
snapshot row plus the (empty) tail, so its cost should stay flat as the log grows.
"""

from __future__ import annotations

import statistics
import sys
import time
from datetime import UTC, datetime, timedelta

from charter.runtime import NewEvent, PersonaRuntime, PersonaRuntimeSpec
from runtime_common import backends, drop, fresh, open_at

AT = datetime(2026, 4, 24, tzinfo=UTC)


def fill(location: str, total: int) -> PersonaRuntime:
    log = open_at(location)
    specs = [PersonaRuntimeSpec("target", "1.0.0", schedules=("*/5 * * * *",))]
    rt = PersonaRuntime(log, specs)
    filler = total - 500
    batch = 5000
    for start in range(0, filler, batch):
        n = min(batch, filler - start)
        log.append(
            [
                NewEvent(f"noise{(start + i) % 50}", "persona.run.completed", AT, {"i": start + i})
                for i in range(n)
            ]
        )
    for i in range(100):  # 5 events per completed tick
        rt.tick("target", at=AT + timedelta(minutes=i), cost_usd=0.001, tokens=10)
    return rt


def measure(rt: PersonaRuntime, rounds: int = 200) -> tuple[float, float]:
    now = AT + timedelta(hours=3)
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        rt.status("target", now=now)
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95)]


def main() -> None:
    sizes = [1_000, 100_000] + ([1_000_000] if "--million" in sys.argv else [])
    with backends() as targets:
        for backend, root in targets:
            for size in sizes:
                loc = fresh(root, f"s{size}")
                rt = fill(loc, size)
                p50, p95 = measure(rt)
                print(
                    f"{backend:10s} status with {rt.log.last_event_id():>9,} events: "
                    f"p50 {p50:6.2f} ms  p95 {p95:6.2f} ms"
                )
                rt.log.close()
                drop(loc)


if __name__ == "__main__":
    main()
