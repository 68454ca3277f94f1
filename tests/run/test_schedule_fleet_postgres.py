"""Schedules across a fleet that starts and stops (issue 15, "schedules fire once").

Replicas are ``charter serve --once --at T`` processes started together on one
PostgreSQL (a replica's tick at T, racing the others'): at each occurrence any subset of
the fleet is up, and each occurrence fires exactly once; after the whole fleet was down
over several occurrences, the replicas that come back catch up once, with the latest
missed occurrence (within the documented 24 h window), never once per replica and never
once per missed minute.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from .conftest import charter_argv, persona_toml
from .test_postgres import pg_url  # noqa: F401  (the fixture)
from .test_replicas_postgres import _kinds


def _fleet_tick(pack: Path, url: str, at: str, replicas: int) -> list[str]:
    argv = charter_argv("serve", "--once", "--json", "--at", at,
                        "--manifest", str(pack), "--state", url)  # fmt: skip
    procs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(replicas)
    ]
    statuses: list[str] = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        statuses += [r["status"] for r in json.loads(out)]
    return statuses


def test_each_occurrence_fires_once_while_replicas_come_and_go(
    make_pack: Callable[..., Path],
    pg_url: str,  # noqa: F811
) -> None:
    pack = make_pack(persona_toml(extra='schedules = ["*/30 * * * *"]'))
    # (tick time, replicas up): three, then one, then two; then all down over 10:30,
    # 11:00 and 11:30, and three come back at 11:40
    rounds = [
        ("2026-11-21T09:30:05Z", 3),
        ("2026-11-21T09:30:40Z", 2),  # a replica restarted within the same minute
        ("2026-11-21T10:00:02Z", 1),
        ("2026-11-21T10:00:30Z", 3),
        ("2026-11-21T11:40:00Z", 3),
        ("2026-11-21T11:45:00Z", 2),
    ]
    completed = 0
    for at, up in rounds:
        statuses = _fleet_tick(pack, pg_url, at, up)
        assert set(statuses) <= {"completed", "lease_busy", "duplicate"}, statuses
        completed += statuses.count("completed")
    fired = [p["work_key"] for k, p in _kinds(pg_url) if k == "persona.schedule.fired"]
    assert fired == [
        "schedule:actor:2026-11-21T09:30Z",
        "schedule:actor:2026-11-21T10:00Z",
        "schedule:actor:2026-11-21T11:30Z",  # the catch-up: once, the latest missed
    ]
    assert completed == 3
    runs = [p["work_key"] for k, p in _kinds(pg_url) if k == "persona.run.completed"]
    assert sorted(runs) == sorted(fired)
