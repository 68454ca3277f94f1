"""Append throughput, single-event transactions and batched, on SQLite and PostgreSQL."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from charter.runtime import NewEvent
from runtime_common import backends, drop, fresh, open_at

AT = datetime(2026, 4, 24, tzinfo=UTC)


def event(i: int) -> NewEvent:
    return NewEvent("bench", "persona.bench", AT, {"i": i, "work_key": f"k{i}"})


def main() -> None:
    with backends() as targets:
        for backend, root in targets:
            single_n = 2000
            loc = fresh(root, "single")
            log = open_at(loc)
            start = time.perf_counter()
            for i in range(single_n):
                log.append([event(i)])
            single = single_n / (time.perf_counter() - start)
            log.close()
            drop(loc)

            loc = fresh(root, "batched")
            log = open_at(loc)
            batches, size = 200, 100
            start = time.perf_counter()
            for b in range(batches):
                log.append([event(b * size + i) for i in range(size)])
            batched = batches * size / (time.perf_counter() - start)
            log.close()
            drop(loc)
            print(
                f"{backend:10s} append: single-event txns {single:8.0f} events/s | "
                f"batched x{size} {batched:8.0f} events/s"
            )


if __name__ == "__main__":
    main()
