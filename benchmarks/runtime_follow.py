"""``supervision tail --follow`` latency: from append commit to the frame being yielded.

The follower runs in a thread with its own connection (SQLite: short polling;
PostgreSQL: LISTEN/NOTIFY); the writer appends one event at a time.
"""

from __future__ import annotations

import statistics
import threading
import time
from datetime import UTC, datetime

from charter.runtime import NewEvent, follow
from runtime_common import backends, drop, fresh, open_at

AT = datetime(2026, 4, 24, tzinfo=UTC)
N = 100


def consume(
    location: str, committed: dict[int, float], latencies: list[float], ready: threading.Event
) -> None:
    log = open_at(location)
    ready.set()
    for frame in follow(log, limit=N, idle_timeout=10):
        seen = time.perf_counter()
        while frame["event_id"] not in committed:
            time.sleep(0)
        latencies.append((seen - committed[frame["event_id"]]) * 1000)
    log.close()


def run(location: str) -> list[float]:
    writer = open_at(location)
    committed: dict[int, float] = {}
    latencies: list[float] = []
    ready = threading.Event()
    thread = threading.Thread(target=consume, args=(location, committed, latencies, ready))
    thread.start()
    ready.wait()
    time.sleep(0.2)
    for i in range(N):
        appended = writer.append([NewEvent("bench", "persona.bench", AT, {"i": i})])
        committed[appended[0].event_id] = time.perf_counter()
        time.sleep(0.02)
    thread.join()
    writer.close()
    return sorted(latencies)


def main() -> None:
    with backends() as targets:
        for backend, root in targets:
            loc = fresh(root, "follow")
            open_at(loc).close()
            lat = run(loc)
            drop(loc)
            print(
                f"{backend:10s} tail --follow append->frame: "
                f"p50 {statistics.median(lat):6.2f} ms  p95 {lat[int(N * 0.95)]:6.2f} ms  "
                f"max {lat[-1]:6.2f} ms"
            )


if __name__ == "__main__":
    main()
