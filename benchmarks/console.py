"""Console speed: the fleet page for 1,000 personas and ``/metrics``, server-side.

A SQLite state with 1,000 personas (each with two completed runs and a spend, snapshots
current as the runtime leaves them) is served by ``charter console``'s app in-process
(Starlette's TestClient, no sockets); ``/healthz`` is the baseline in the same run.
Targets: fleet < 200 ms, /metrics < 50 ms. The live feed is measured over a real uvicorn
socket: an event appended by another connection until its SSE frame is read (target
< 100 ms p95 on loopback).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from charter.run import RunOptions
from charter.run.web import Access, bind_socket, build_app, http_server
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


def feed_latency(state: Path, app: Any, rounds: int = 50) -> tuple[float, float]:
    """Append-to-SSE-frame latency over loopback, in ms (p50, p95)."""
    import httpx

    sock = bind_socket("127.0.0.1", 0)
    server = http_server(app, sock)
    serving = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    serving.start()
    while not server.started:
        time.sleep(0.01)
    port = sock.getsockname()[1]
    log = open_event_log(state_dir=state)
    runtime = PersonaRuntime(log, [PersonaRuntimeSpec("p0000", "1.0.0")])
    start_id = log.last_event_id()
    arrived: dict[int, float] = {}
    headers = {"Authorization": f"Bearer {TOKEN}", "Last-Event-ID": str(start_id)}

    def read() -> None:
        url = f"http://127.0.0.1:{port}/console/feed"
        with httpx.stream("GET", url, headers=headers, timeout=30) as response:
            for line in response.iter_lines():
                if line.startswith("data: "):
                    arrived[json.loads(line[6:])["event_id"]] = time.perf_counter()
                    if len(arrived) >= rounds * 5:
                        return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(0.3)
    samples = []
    for k in range(rounds):
        sent = time.perf_counter()
        runtime.tick("p0000", at=AT + timedelta(hours=1, minutes=k), cost_usd=0.0, tokens=0)
        first = log.last_event_id()
        while first not in arrived and time.perf_counter() - sent < 5:
            time.sleep(0.001)
        samples.append((arrived.get(first, time.perf_counter()) - sent) * 1000)
    samples.sort()
    if Path("/usr/bin/chromium").exists():
        runtime.personas["p0001"] = PersonaRuntimeSpec("p0001", "1.0.0")
        b50, b95 = browser_latency(f"http://127.0.0.1:{port}", runtime)
        print(f"{'feed append -> browser':24s} p50 {b50:7.2f} ms  p95 {b95:7.2f} ms")
    server.should_exit = True
    serving.join(timeout=5)
    log.close()
    return statistics.median(samples), samples[int(len(samples) * 0.95)]


def browser_latency(base: str, runtime: PersonaRuntime, rounds: int = 30) -> tuple[float, float]:
    """Append -> the frame's line in the fleet page's live feed, in Debian's Chromium (ms)."""
    from playwright.sync_api import sync_playwright

    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--no-first-run"]  # fmt: skip
    samples = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=args)
        page = browser.new_page(extra_http_headers={"Authorization": f"Bearer {TOKEN}"})
        page.goto(f"{base}/console?state=idle")
        page.wait_for_timeout(500)
        for k in range(rounds):
            sent = time.perf_counter()
            runtime.tick("p0001", at=AT + timedelta(hours=2, minutes=k))
            last = runtime.log.last_event_id()
            page.wait_for_function(
                "(id) => { const li = document.querySelector('#feed li');"
                " return li !== null && li.textContent.startsWith(id + ' '); }",
                arg=last,
                polling="raf",
            )
            samples.append((time.perf_counter() - sent) * 1000)
        browser.close()
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
        p50, p95 = feed_latency(state, app)
        print(f"{'feed append -> SSE':24s} p50 {p50:7.2f} ms  p95 {p95:7.2f} ms")


if __name__ == "__main__":
    main()
