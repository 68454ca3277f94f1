"""Console speed: the fleet page for 1,000 personas and ``/metrics``, server-side.

A SQLite state with 1,000 personas (each with two completed runs and a spend, snapshots
current as the runtime leaves them) is served by ``charter console``'s app in-process
(Starlette's TestClient, no sockets); ``/healthz`` is the baseline in the same run.
Targets: fleet < 200 ms, /metrics < 50 ms.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from charter.run import RunOptions
from charter.run.web import Access, build_app
from charter.runtime import PersonaRuntime, PersonaRuntimeSpec, open_event_log

AT = datetime(2026, 11, 24, 9, tzinfo=UTC)
PERSONAS = 1_000
TOKEN = "bench-token-0123456789"


def fill(state: Path) -> int:
    log = open_event_log(state_dir=state)
    specs = [PersonaRuntimeSpec(f"p{i:04d}", "1.0.0") for i in range(PERSONAS)]
    runtime = PersonaRuntime(log, specs)
    for spec in specs:
        for k in range(2):
            runtime.tick(spec.name, at=AT + timedelta(minutes=k), cost_usd=0.01, tokens=100)
    last = log.last_event_id()
    log.close()
    return last


def measure(client: TestClient, path: str, rounds: int, **headers: Any) -> tuple[float, float]:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        response = client.get(path, headers=headers)
        samples.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, response.text[:200]
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95)]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state"
        events = fill(state)
        app = build_app(RunOptions(state_dir=state), access=Access({TOKEN: "bench"}))
        client = TestClient(app)
        auth = {"Authorization": f"Bearer {TOKEN}"}
        html = client.get("/console", headers=auth).text
        assert html.count("data-persona=") == PERSONAS
        print(f"{PERSONAS:,} personas, {events:,} events (SQLite)")
        for label, path, rounds in (
            ("/healthz (baseline)", "/healthz", 200),
            ("/metrics", "/metrics", 100),
            ("/api/fleet", "/api/fleet", 20),
            ("/console (fleet page)", "/console", 20),
        ):
            p50, p95 = measure(client, path, rounds, **auth)
            print(f"{label:24s} p50 {p50:7.2f} ms  p95 {p95:7.2f} ms")


if __name__ == "__main__":
    main()
