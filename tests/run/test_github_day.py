"""The measured day (issue 31): a realistic day of one repository's GitHub deliveries
(about 200: pushes, pull requests opened, synchronized, asked for review, reviewed,
commented on and closed, issues, check suites, GitHub's redeliveries) posted to two
``charter serve`` replicas on PostgreSQL while one replica is killed (``kill -9``)
twice. A delivery a dead replica did not answer is sent to the other one (as a load
balancer, or GitHub's redelivery, would). Afterwards every delivery is accounted for:
ran once, coalesced into a named run, or refused with a reason; no side effect
happened twice. The counts are printed (``pytest -s``)."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from charter.runtime import open_event_log
from charter.runtime.clock import utc_now

from .conftest import charter_argv
from .test_postgres import pg_url  # noqa: F401  (the fixture)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import github_day

SECRET = "day-secret"


class Replica:
    def __init__(self, project: Path, url: str) -> None:
        env = {**os.environ, "CHARTER_WEBHOOK_SECRET_GITHUB": SECRET}
        argv = charter_argv("serve", "--port", "0", "--workers", "2", "--manifest",
                            str(project), "--state", url)  # fmt: skip
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, env=env, start_new_session=True)  # fmt: skip
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.startswith("listening on"), line
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()
        self.base = line.split()[2]
        self.alive = True

    def kill(self) -> None:
        self.alive = False
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.alive:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)


def _post(base: str, delivery: github_day.Delivery) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(f"{base}/hooks/github", data=delivery.body, method="POST")
    for key, value in delivery.headers(SECRET).items():
        request.add_header(key, value)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_a_day_of_deliveries_with_a_replica_killed_twice(
    tmp_path: Path,
    pg_url: str,  # noqa: F811
) -> None:
    project = tmp_path / "day"
    project.mkdir()
    (project / "charter.toml").write_text(github_day.manifest("day.py:run"))
    (project / "day.py").write_text(github_day.WORKFLOW)
    deliveries = github_day.day()
    replicas = [Replica(project, pg_url), Replica(project, pg_url)]
    lock = threading.Lock()
    answers: dict[int, tuple[int, dict[str, Any]]] = {}
    resent = 0

    def send(index: int) -> None:
        nonlocal resent
        delivery = deliveries[index]
        for attempt in range(200):
            with lock:
                live = [r for r in replicas if r.alive]
            replica = live[(index + attempt) % len(live)]
            try:
                code, answer = _post(replica.base, delivery)
            except OSError:  # the replica died under it: the sender tries again elsewhere
                code, answer = 0, {}
            if code == 202 or code == 200:
                with lock:
                    answers[index] = (code, answer)
                return
            with lock:
                resent += 1
            time.sleep(0.1)
        raise AssertionError(f"delivery {index} never answered 202")

    kills = {len(deliveries) // 3, 2 * len(deliveries) // 3}
    try:
        with ThreadPoolExecutor(4) as pool:
            futures = []
            for index in range(len(deliveries)):
                if index in kills:
                    victim = replicas[0]
                    victim.kill()  # kill -9, mid-run most likely
                    with lock:
                        replicas[0] = Replica(project, pg_url)  # and back, as a supervisor would
                futures.append(pool.submit(send, index))
                time.sleep(1 / 40)
            for future in futures:
                future.result()
        _wait_quiet(project, pg_url)
    finally:
        for replica in replicas:
            replica.stop()

    log = open_event_log(url=pg_url)
    try:
        events = list(log.iter_all())
    finally:
        log.close()
    counts = _account(deliveries, answers, events)
    done = [json.loads(line) for line in (project / "done.jsonl").read_text().splitlines()]
    effects = collections.Counter((d["persona"], d["key"]) for d in done)
    counts["side effects"] = len(done)
    counts["replicas killed"] = 2
    counts["posts resent after a dead replica"] = resent
    print("\n" + "\n".join(f"  {name:40s} {value}" for name, value in counts.items()))
    assert not [pair for pair, n in effects.items() if n > 1], "a side effect happened twice"
    completed = {
        (e.persona, e.payload["work_key"]) for e in events if e.kind == "persona.run.completed"
    }
    # a side effect without a completed run: a run that died after it, whose retry found
    # the call undecided (charter.run.parking.UNDECIDED) and failed closed
    counts["side effects of runs that did not complete"] = len(set(effects) - completed)
    assert counts["lost"] == 0
    assert counts["deliveries"] == len(deliveries)


def _wait_quiet(project: Path, url: str) -> None:
    """Until no persona has queued work, a live or expired lease: everything finished."""
    from charter.run import RunOptions, open_session

    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        session = open_session(RunOptions(manifest=project, state_url=url))
        try:
            busy = [
                name for name in session.runtime.personas
                if (s := session.runtime.status(name, now=utc_now()).to_dict())["queue"]["count"]
                or s["active_runs"] or s["expired_leases"] or s["leases"]
            ]  # fmt: skip
        finally:
            session.close()
        if not busy:
            return
        time.sleep(0.5)
    raise AssertionError(f"still busy after 240 s: {busy}")


def _account(
    deliveries: list[github_day.Delivery],
    answers: dict[int, tuple[int, dict[str, Any]]],
    events: list[Any],
) -> dict[str, int]:
    """Every delivery ends in exactly one of: ran (its work's run completed), coalesced
    into a named run, refused with a reason. Read from the log, not from the answers: a
    delivery whose first answer was lost (its replica died) was recorded all the same."""
    received: dict[str, list[tuple[str, str]]] = collections.defaultdict(list)
    completed: dict[tuple[str, str], str] = {}
    superseded: dict[tuple[str, str], str] = {}
    duplicate_of: dict[tuple[str, str], str] = {}
    dead: dict[tuple[str, str], dict[str, Any]] = {}
    runs_per_key: collections.Counter[tuple[str, str]] = collections.Counter()
    for e in events:
        p = e.payload
        key = (e.persona, str(p.get("work_key")))
        if e.kind == "persona.delivery.received":
            received[p["delivery_id"]].append(key)
        elif e.kind == "persona.run.completed":
            completed[key] = p["run_id"]
            runs_per_key[key] += 1
        elif e.kind == "persona.work.coalesced" and p.get("into"):
            superseded[key] = p["into"]
        elif e.kind == "persona.run.duplicate":
            duplicate_of[key] = str(p.get("original_run_id"))
        elif e.kind == "persona.event.dead_lettered":
            dead[key] = p
    assert not [k for k, n in runs_per_key.items() if n > 1], "a work key ran twice"

    ran_by: set[tuple[str, str]] = set()  # keys counted as some delivery's own run

    def fate(key: tuple[str, str], seen: int = 0) -> str:
        if key in completed:
            if seen == 0 and key not in ran_by:
                ran_by.add(key)
                return "ran"
            return "coalesced into a named run"  # (another delivery's run of this work)
        if key in superseded and seen < 50:
            return fate((key[0], superseded[key]), seen + 1)
        if key in duplicate_of:
            return "coalesced into a named run"
        if key in dead:
            return "dead-lettered with its attempts"
        return "lost"

    counts: collections.Counter[str] = collections.Counter()
    counts["deliveries"] = len(deliveries)
    counts["redeliveries (same X-GitHub-Delivery)"] = sum(d.redelivery for d in deliveries)
    # a delivery and its redeliveries: whichever reached a replica first took the work
    # (posted concurrently, the redelivery may be first), every other one is refused
    posts: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for index, delivery in enumerate(deliveries):
        posts[delivery.delivery_id].append(answers[index][1])
    for ident, answered in posts.items():
        takers = [a for a in answered if a.get("personas")]
        assert len(takers) <= 1, answered
        for answer in answered:
            if answer.get("refused") and not answer.get("personas"):
                assert all(r["status"] == "duplicate" for r in answer["refused"].values())
        counts["refused: a redelivery"] += len(answered) - 1
        offered = received.get(f"github:{ident}", [])
        if not offered:
            assert not takers and not any(a.get("refused") for a in answered), answered
            counts["refused: no persona declares its event and action"] += 1
            continue
        for key in offered:
            counts[f"persona work: {fate(key)}"] += 1
        fates = {fate(key) for key in offered}
        counts["lost"] += "lost" in fates
        counts["delivery: ran or coalesced"] += "lost" not in fates
    counts["runs completed"] = len(completed)
    counts["runs failed"] = sum(1 for e in events if e.kind == "persona.run.failed")
    counts["work superseded by a newer push or head"] = len(superseded)
    counts["retries after a dead replica"] = sum(
        1 for e in events if e.kind == "persona.work.retried"
    )
    counts.setdefault("lost", 0)
    return dict(counts)
