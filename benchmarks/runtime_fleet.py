"""``charter serve`` replicas under webhook load: 1, 2 and 4 replicas on PostgreSQL, and
one replica on SQLite as the baseline (issue 15).

Each replica is a real ``charter serve --workers 2`` process on loopback. A bounded load
generator posts N signed webhooks (round-robin over the replicas) at a fixed rate; every
webhook is a run of a workflow making one tool call under the persona's policy. Printed:
admissions per second (202s over the posting time), p50/p99 webhook-to-admission (the 202
latency: recorded in the log before it answers), p50/p99 webhook-to-completed (the run's
``persona.run.completed`` time minus the post time), completed runs per second and events
per second written to the log; on PostgreSQL also the write transactions per second that
appended events (the log's lock admits one at a time) and webhooks per accept transaction
(group commit), both counted from the rows' ``xmin``; and the log's advisory lock,
sampled from ``pg_locks``/``pg_stat_activity`` every 10 ms while the case runs: samples of
backends waiting for it (``waits``), and its hold time per write transaction (``hold``, ms:
the share of samples in which a backend held it, times the sampled time, over the write
transactions) with the share of that time its holder sat idle waiting for its client
(``idle%``).

    python benchmarks/runtime_fleet.py [--webhooks 200] [--rate 100] [--baseline DIR]
        [--only postgresql-4] [--personas 1]

``--personas N`` spreads the webhooks round-robin over N personas (16 run slots in all),
each with its own queue, leases and state: a fleet's work is rarely one persona's.

``--workload github-day`` posts a repository's day of real GitHub deliveries instead
(``github_day.py``: about 200 pushes, pull request, review, comment, issue and check
suite events with redeliveries, signed with their ``X-GitHub-Delivery``) to four
personas woken by event and action; ``--webhooks`` is then the day's length. Its runs
are not one per webhook (some match no persona, redeliveries and coalesced pushes run
nothing), so ``done`` latencies and runs/s count the runs that completed.

``--baseline DIR`` (a directory holding a ``charter`` package, e.g. ``git archive <commit>
src | tar -x -C /tmp/base`` then ``/tmp/base/src``) runs every case twice, the replicas
first on that code then on this tree's, alternating, so both see the same machine load.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from datetime import datetime
from pathlib import Path

import psycopg

import github_day
from charter.runtime import PostgresEventLog, open_event_log
from charter.runtime.postgres_log import _lock_key, split_state_url
from runtime_common import PG_BASE

SECRET = "bench"
PERSONA = """
[[personas]]
name = "worker{n}"
description = "One tool call per webhook."
entry_workflow = "w.py:run"
autonomy_tier = "act_auto"
receipt_policy = "optional"
tools = ["noop"]
triggers = ["bench.go{n}"]
runtime = {{ max_concurrency = {slots} }}
"""


def manifest(personas: int) -> str:
    """``personas`` personas, ``worker0``... each woken by its own kind ``go0``...; 16
    run slots in all."""
    slots = max(1, 16 // personas)
    return "".join(PERSONA.format(n=n, slots=slots) for n in range(personas))


WORKFLOW = '''
from charter.agent import make_tool


def noop(note: str = "") -> dict:
    """Do nothing."""
    return {"ok": True, "note": note}


def run(ctx):
    ctx.register_tool(make_tool(noop, side_effect_level="read_only"))
    return ctx.call_tool("noop", note=ctx.trigger.work_key)
'''


def start(project: Path, state: list[str], code: str | None) -> tuple[subprocess.Popen[str], str]:
    env = {
        **os.environ,
        "CHARTER_WEBHOOK_SECRET_BENCH": SECRET,
        "CHARTER_WEBHOOK_SECRET_GITHUB": SECRET,
    }
    if code is not None:  # the baseline's package first on the path
        env["PYTHONPATH"] = code
    argv = [sys.executable, "-m", "charter", "serve", "--port", "0", "--workers", "2",
            "--manifest", str(project), *state]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env)  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("listening on"), line
    threading.Thread(target=proc.stdout.read, daemon=True).start()  # keep the pipe drained
    return proc, line.split()[2]


def post(base: str, ident: str, kind: str) -> float:
    body = json.dumps({"id": ident, "type": kind}).encode()
    request = urllib.request.Request(f"{base}/hooks/bench", data=body, method="POST")
    digest = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    request.add_header("X-Hub-Signature-256", "sha256=" + digest)
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 202
    return time.perf_counter() - started


def post_delivery(base: str, delivery: github_day.Delivery) -> float:
    request = urllib.request.Request(f"{base}/hooks/github", data=delivery.body, method="POST")
    for key, value in delivery.headers(SECRET).items():
        request.add_header(key, value)
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 202
    return time.perf_counter() - started


def write_transactions(url: str) -> tuple[int, int]:
    """Write transactions that appended events, and those that accepted webhooks (each
    row's ``xmin`` is the transaction that wrote it)."""
    conninfo, schema = split_state_url(url)
    with psycopg.connect(conninfo) as conn:
        row = conn.execute(
            f"SELECT count(DISTINCT xmin::text), count(DISTINCT xmin::text) FILTER "
            f"(WHERE kind = 'persona.work.queued') FROM {schema}.events"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


class LockSampler(threading.Thread):
    """Samples the log's advisory lock every ``interval`` s: backends waiting for it, and
    whether (and how: running a statement or idle waiting for its client) one holds it."""

    def __init__(self, url: str, interval: float = 0.01) -> None:
        super().__init__(daemon=True)
        conninfo, schema = split_state_url(url)
        key = _lock_key(schema, "persona.runtime.events")
        # pg_locks shows a bigint advisory key as classid (high half), objid (low half)
        self.high, self.low = (key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF
        self.conninfo, self.interval = conninfo, interval
        self.samples = self.waiting = self.held = self.idle = 0
        self.elapsed = 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        query = (
            "SELECT count(*) FILTER (WHERE NOT l.granted), count(*) FILTER (WHERE l.granted), "
            "count(*) FILTER (WHERE l.granted AND a.state LIKE 'idle in transaction%%') "
            "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.classid = %s AND l.objid = %s"
        )
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            began = time.perf_counter()
            while not self.stop.is_set():
                row = conn.execute(query, (self.high, self.low)).fetchone()
                assert row is not None
                self.samples += 1
                self.waiting += int(row[0])
                self.held += 1 if row[1] else 0
                self.idle += 1 if row[2] else 0
                time.sleep(self.interval)
            self.elapsed = time.perf_counter() - began

    def hold_ms(self, txns: int) -> float:
        """The lock's hold time per write transaction, ms."""
        if not txns or not self.samples:
            return 0.0
        return self.held / self.samples * self.elapsed / txns * 1000


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def run_case(
    label: str,
    replicas: int,
    state: list[str],
    location: str,
    n: int,
    rate: float,
    code: str | None = None,
    personas: int = 1,
    workload: str = "one-call",
) -> None:
    day = github_day.day()[:n] if workload == "github-day" else []
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        if day:
            text = github_day.manifest("w.py:run", ttl=300)
            if code is not None:  # a baseline from before [runtime] retry_backoff_seconds
                text = text.replace(", retry_backoff_seconds = 0.2", "")
            (project / "charter.toml").write_text(text)
            (project / "w.py").write_text(github_day.WORKFLOW)
        else:
            (project / "charter.toml").write_text(manifest(personas))
            (project / "w.py").write_text(WORKFLOW)
        procs = [start(project, state, code) for _ in range(replicas)]
        posted: dict[str, float] = {}
        admission: list[float] = []
        lock = threading.Lock()
        sampler = LockSampler(location) if location.startswith("postgresql") else None
        if sampler is not None:
            sampler.start()
        try:
            begin = time.time()

            def send(i: int) -> None:
                at = time.time()
                if day:
                    took = post_delivery(procs[i % replicas][1], day[i])
                    with lock:
                        posted[day[i].delivery_id] = at
                        admission.append(took)
                    return
                ident, kind = f"k{i}", f"go{i % personas}"
                took = post(procs[i % replicas][1], ident, kind)
                with lock:
                    posted[f"webhook:bench:{kind}:{ident}"] = at
                    admission.append(took)

            threads = []
            for i in range(n):
                due = begin + i / rate
                time.sleep(max(0.0, due - time.time()))
                thread = threading.Thread(target=send, args=(i,))
                thread.start()
                threads.append(thread)
            for thread in threads:
                thread.join()
            posted_for = time.time() - begin
            log = open_event_log(url=location) if location.startswith("postgresql") else (
                open_event_log(state_dir=location))  # fmt: skip
            try:
                deadline = time.time() + 300
                done = {}
                seen = 0  # read on from here: rereading the whole log competed with the fleet
                quiet_since = time.time()
                delivered: dict[tuple[str, str], str] = {}  # the day: (persona, key) -> id
                while time.time() < deadline:
                    fresh = log.read(after=seen, limit=5000)
                    for e in fresh:
                        seen = e.event_id
                        if e.kind == "persona.delivery.received":
                            delivered.setdefault(
                                (e.persona, e.payload["work_key"]), e.payload["delivery_id"]
                            )
                        if e.kind == "persona.run.completed":
                            done[(e.persona, e.payload["work_key"])] = e
                    if fresh:
                        quiet_since = time.time()
                    if not day and len(done) >= n:
                        break
                    if day and time.time() - quiet_since > 3:  # the day's work is done
                        break
                    time.sleep(0.2)
                if sampler is not None:
                    sampler.stop.set()
                    sampler.join()
                events = sum(1 for _ in log.iter_all())
                txns = accepts = 0
                if location.startswith("postgresql"):
                    txns, accepts = write_transactions(location)
            finally:
                log.close()
        finally:
            for proc, _ in procs:
                proc.terminate()
                proc.wait(timeout=60)
    if not day and len(done) < n:  # a shared machine: a PostgreSQL restarted by another test
        print(f"{label}: only {len(done)} of {n} runs completed within 300 s (figures below "
              "count those)")  # fmt: skip
    n = len(done)
    finished = [datetime.timestamp(e.occurred_at) for e in done.values()]
    if day:  # from the post of the delivery that brought the work (before: no such event)
        stamps = {k: posted.get(delivered.get(k, "").removeprefix("github:")) for k in done}
        latency = [
            datetime.timestamp(done[k].occurred_at) - at for k, at in stamps.items() if at
        ] or [0.0]
    else:
        latency = [datetime.timestamp(e.occurred_at) - posted[k[1]] for k, e in done.items()]
    span = max(finished) - begin
    per_txn = f"{txns / span:7.1f}" if txns else "      -"
    accepted = len(admission)
    per_accept = f"{accepted / accepts:9.1f}" if accepts else "        -"
    locks = "      -      -     -"
    if sampler is not None and sampler.samples:
        idle = 100 * sampler.idle / sampler.held if sampler.held else 0.0
        locks = f"{sampler.waiting:7d} {sampler.hold_ms(txns):6.2f} {idle:5.0f}"
    print(
        f"{label:29s} {accepted / posted_for:8.1f} {pct(admission, 0.5):8.1f} "
        f"{pct(admission, 0.99):8.1f} "
        f"{pct(latency, 0.5):9.1f} {pct(latency, 0.99):9.1f} {n / span:9.1f} {events / span:9.1f} "
        f"{per_txn} {per_accept} {locks}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--webhooks", type=int, default=200)
    parser.add_argument("--rate", type=float, default=100.0, help="webhooks per second")
    parser.add_argument("--baseline", help="a directory holding the baseline's charter package")
    parser.add_argument(
        "--personas", type=int, default=1, help="spread the webhooks over this many personas"
    )
    parser.add_argument(
        "--only", action="append", default=[], help="sqlite-1, postgresql-1, -2 or -4 (repeatable)"
    )
    parser.add_argument(
        "--workload",
        choices=["one-call", "github-day"],
        default="one-call",
        help="one tool call per webhook, or a repository's day of GitHub deliveries",
    )
    args = parser.parse_args()
    codes: list[tuple[str, str | None]] = [("", None)]
    if args.baseline:
        if not (Path(args.baseline) / "charter" / "__init__.py").is_file():
            parser.error(f"--baseline {args.baseline}: no charter package there")
        codes = [("before ", str(Path(args.baseline).resolve())), ("after ", None)]
    what = "a GitHub day's deliveries" if args.workload == "github-day" else "webhooks"
    print(f"{args.webhooks} {what} at {args.rate:g}/s over {args.personas} persona(s), "
          "serve --workers 2 per replica")  # fmt: skip
    print(f"{'case':29s} {'adm/s':>8s} {'adm p50':>8s} {'adm p99':>8s} {'done p50':>9s} "
          f"{'done p99':>9s} {'runs/s':>9s} {'events/s':>9s} {'txns/s':>7s} "
          f"{'hooks/txn':>9s} {'waits':>7s} {'hold':>6s} {'idle%':>5s}   (ms)")  # fmt: skip
    cases = [("sqlite", 1), ("postgresql", 1), ("postgresql", 2), ("postgresql", 4)]
    for backend, replicas in cases:
        if args.only and f"{backend}-{replicas}" not in args.only:
            continue
        for tag, code in codes:
            label = f"{tag}{backend}, {replicas} replica(s)"
            if backend == "sqlite":
                with tempfile.TemporaryDirectory() as tmp:
                    run_case(label, 1, ["--state-dir", tmp], tmp, args.webhooks, args.rate, code,
                             args.personas, args.workload)  # fmt: skip
                continue
            url = f"{PG_BASE}?schema=charter_fleet_{uuid.uuid4().hex[:10]}"
            try:
                PostgresEventLog(url).close()
            except Exception as exc:
                print(f"postgresql unavailable, skipped: {exc}")
                return
            try:
                run_case(label, replicas, ["--state", url], url, args.webhooks, args.rate, code,
                         args.personas, args.workload)  # fmt: skip
            finally:
                log = PostgresEventLog(url)
                log.drop_schema()
                log.close()


if __name__ == "__main__":
    main()
