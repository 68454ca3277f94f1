"""2, 4 and 8 concurrent writer processes triggering overlapping work keys.

Every process triggers the same 40 pull requests (in a different order); a work key may be
run once only within the duplicate window, so the log must hold exactly one run per key.
"""

from __future__ import annotations

import collections
import subprocess
import sys
import time

from runtime_common import backends, drop, fresh, open_at

WRITER = """
import random, sys, time
from datetime import UTC, datetime
from charter.runtime import PersonaRuntime, PersonaRuntimeSpec, PostgresEventLog, SqliteEventLog
loc, seed, start_at = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
log = PostgresEventLog(loc) if loc.startswith("postgresql") else SqliteEventLog(loc)
rt = PersonaRuntime(log, [PersonaRuntimeSpec("p", triggers=("github.pull_request",))],
                    holder=f"proc{seed}")
keys = list(range(40)); random.Random(seed).shuffle(keys)
at = datetime(2026, 4, 24, 12, tzinfo=UTC)
counts = {}
time.sleep(max(0.0, start_at - time.time()))  # all writers start together
for n in keys:
    try:
        r = rt.trigger("p", provider="github", kind="pull_request", at=at,
                       metadata={"repository": "o/r", "number": str(n)})
        status = r.status.value
    except Exception as exc:  # "database is locked" would land here
        status = "error: " + str(exc)[:60]
    counts[status] = counts.get(status, 0) + 1
print(counts)
"""


def main() -> None:
    with backends() as targets:
        for backend, root in targets:
            for procs in (2, 4, 8):
                loc = fresh(root, f"c{procs}")
                open_at(loc).close()
                go = time.time() + 1.5
                children = [
                    subprocess.Popen(
                        [sys.executable, "-c", WRITER, loc, str(k), str(go)],
                        stdout=subprocess.PIPE,
                        text=True,
                    )
                    for k in range(procs)
                ]
                outputs = [c.communicate(timeout=300)[0].strip() for c in children]
                elapsed = time.time() - go
                log = open_at(loc)
                runs = collections.Counter(
                    e.payload["work_key"] for e in log.iter_all() if e.kind == "persona.run.started"
                )
                ids = [e.event_id for e in log.iter_all()]
                log.close()
                drop(loc)
                dupes = sum(1 for n in runs.values() if n > 1)
                assert ids == list(range(1, len(ids) + 1)), "event ids not contiguous"
                print(
                    f"{backend:10s} {procs} writers x 40 overlapping keys: {len(runs)} keys run, "
                    f"duplicate runs {dupes}, {len(ids)} events, {elapsed:5.2f} s; "
                    f"receipts per process {outputs}"
                )
                assert dupes == 0 and len(runs) == 40


if __name__ == "__main__":
    main()
