"""Three ``charter serve`` replicas on one PostgreSQL; one is killed -9 in the middle of
runs (issue 15, "a replica dies, nothing is lost").

Webhooks are posted round-robin, each one twice to two different replicas (a sender that
retried): one admission per work key. A replica holding running work is SIGKILLed; its
leases expire by the recovery rule (the run counts as failed), the survivors go on, and the
senders' redeliveries of the failed keys run them again. At the end every work key is
completed exactly once, and every run that started ended exactly once: completed, failed,
or failed by its expired lease.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from .conftest import persona_toml
from .test_postgres import pg_url  # noqa: F401  (the fixture)
from .test_replicas_postgres import _hook, _kinds, _serve, _wait

KEYS = [f"k{i}" for i in range(12)]
END = ("persona.run.completed", "persona.run.failed", "persona.lease.expired")


def test_kill_9_of_a_replica_mid_run_loses_nothing(
    make_pack: Callable[..., Path],
    pg_url: str,  # noqa: F811
) -> None:
    pack = make_pack(persona_toml(extra="runtime = { lease_ttl_seconds = 2, max_concurrency = 6 }"))
    replicas = [_serve(pack, pg_url) for _ in range(3)]
    bases = [base for _, base in replicas]
    plan = {"sleep": 1.5, "calls": []}
    try:
        # each key to two replicas at once (a retrying sender): one admission either way
        posts = []
        for i, key in enumerate(KEYS):
            for base in (bases[i % 3], bases[(i + 1) % 3]):
                posts.append(threading.Thread(target=_hook, args=(base, key, plan)))
        for thread in posts:
            thread.start()
        for thread in posts:
            thread.join()

        def running_on(log: list[tuple[str, dict[str, object]]]) -> Counter[str]:
            live: dict[object, str] = {}
            for kind, payload in log:
                if kind == "persona.lease.acquired":
                    live[payload["run_id"]] = str(payload["holder"])
                elif kind in END:
                    live.pop(payload.get("run_id"), None)
            return Counter(live.values())

        _wait(pg_url, lambda log: any(n >= 1 for n in running_on(log).values()))
        holder, _ = running_on(_kinds(pg_url)).most_common(1)[0]
        victim = next(proc for proc, _ in replicas if holder.endswith(f":{proc.pid}"))
        os.killpg(victim.pid, signal.SIGKILL)
        victim.communicate()
        survivors = [base for proc, base in replicas if proc is not victim]

        def settled(log: list[tuple[str, dict[str, object]]]) -> bool:
            started = {p["run_id"] for k, p in log if k == "persona.run.started"}
            ended = {p.get("run_id") for k, p in log if k in END}
            return bool(started) and started <= ended

        # the survivors finish their work; the victim's leases expire once their TTL has
        # passed and a survivor touches the persona (the redeliveries below do)
        time.sleep(2.5)
        deadline = time.monotonic() + 60
        while True:
            log = _kinds(pg_url)
            done = {str(p["work_key"]) for k, p in log if k == "persona.run.completed"}
            missing = [key for key in KEYS if f"webhook:test:go:{key}" not in done]
            if not missing and settled(log):
                break
            assert time.monotonic() < deadline, f"never settled: missing {missing}"
            for i, key in enumerate(missing):  # the senders retry what did not complete
                for proc, _ in replicas:
                    assert proc is victim or proc.poll() is None, proc.communicate()[1][-6000:]
                _hook(survivors[i % 2], key, plan)
            time.sleep(1.0)
    finally:
        for proc, _ in replicas:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.communicate(timeout=60)

    log = _kinds(pg_url)
    completed = Counter(str(p["work_key"]) for k, p in log if k == "persona.run.completed")
    assert completed == Counter(f"webhook:test:go:{key}" for key in KEYS)  # once each
    ends = Counter(p.get("run_id") for k, p in log if k in END)
    started = [p["run_id"] for k, p in log if k == "persona.run.started"]
    assert sorted(ends) == sorted(started) and set(ends.values()) == {1}
    # the victim really held work when it died, and that work was failed by expiry
    expired = [p for k, p in log if k == "persona.lease.expired"]
    assert expired and all(str(p["holder"]).endswith(f":{victim.pid}") for p in expired)
