"""Console speed: the fleet page and a persona page for 1,000 personas and 100,000 runs.

A SQLite state with 1,000 personas and 100 completed runs each, spread over the last 30
days (written by the runtime, 1,000 runs per transaction, snapshots current as the
runtime leaves them), is served by ``charter console``'s app in-process (Starlette's
TestClient, no sockets); ``/healthz`` is the baseline, requested in turn with the pages
in every round. Targets: fleet and persona page p50 < 100 ms, /metrics < 50 ms. In
Chromium: time to the first chart drawn on a persona page (first contentful paint: the
charts are inline SVG in the HTML; target < 500 ms). The live feed is measured over a
real uvicorn socket: an event appended by another connection until its SSE frame is read
(target < 100 ms p95 on loopback).

``--personas N --runs M`` change the size (``--runs`` per persona).
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

AT = datetime.now(UTC).replace(microsecond=0)
PERSONAS = 1_000
RUNS = 100
TOKEN = "bench-token-0123456789"


def fill(state: Path, personas: int = PERSONAS, runs: int = RUNS) -> int:
    """``runs`` completed runs per persona over the last 30 days, one transaction per round."""
    from charter.runtime.engine import WorkItem

    log = open_event_log(state_dir=state)
    specs = [PersonaRuntimeSpec(f"p{i:04d}", "1.0.0") for i in range(personas)]
    runtime = PersonaRuntime(log, specs)
    step = timedelta(days=30) / runs
    for k in range(runs):
        at = AT - timedelta(days=30) + step * (k + 1)
        work = [
            (s.name, WorkItem(f"bench:{s.name}:{k}", "schedule", 0.01 + (i % 7) * 0.001, 100))
            for i, s in enumerate(specs)
        ]
        # a round of runs in one transaction (PersonaRuntime.submit does one per run)
        runtime.transact(
            at,
            lambda b, work=work: [runtime._submit(b, n, w, False, None, False) for n, w in work],
            personas={n: [w.work_key] for n, w in work},
        )
    last = log.last_event_id()
    log.close()
    return last


def interleaved(
    client: TestClient, paths: list[str], rounds: int, **headers: Any
) -> dict[str, tuple[float, float, float]]:
    """p50 and p95 wall time and p50 CPU time (ms) of each path, the paths requested in
    turn in every round after one warm-up request each (the first folds the log).

    CPU time is the process's (the app runs in this process): on a shared machine the
    wall time includes waiting for a core, the CPU time does not."""
    for path in paths:
        assert client.get(path, headers=headers).status_code == 200
    wall: dict[str, list[float]] = {p: [] for p in paths}
    cpu: dict[str, list[float]] = {p: [] for p in paths}
    for _ in range(rounds):
        for path in paths:
            start, start_cpu = time.perf_counter(), time.process_time()
            response = client.get(path, headers=headers)
            wall[path].append((time.perf_counter() - start) * 1000)
            cpu[path].append((time.process_time() - start_cpu) * 1000)
            assert response.status_code == 200, response.text[:200]
    out = {}
    for path in paths:
        values = sorted(wall[path])
        p95 = values[int(len(values) * 0.95)]
        out[path] = (statistics.median(values), p95, statistics.median(cpu[path]))
    return out


def first_chart(base: str, rounds: int = 10) -> tuple[float, float]:
    """Chromium: navigation start to the first contentful paint of a persona page (ms)."""
    from playwright.sync_api import sync_playwright

    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--no-first-run"]  # fmt: skip
    samples = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=args)
        page = browser.new_page(extra_http_headers={"Authorization": f"Bearer {TOKEN}"})
        for k in range(rounds):
            page.goto(f"{base}/console/personas/p{k:04d}?window=30d")
            page.wait_for_selector("#chart-runs svg")
            paint = page.evaluate(
                "() => performance.getEntriesByName('first-contentful-paint')[0].startTime"
            )
            samples.append(float(paint))
        browser.close()
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
        c50, c95 = first_chart(f"http://127.0.0.1:{port}")
        print(f"{'persona page first chart':24s} p50 {c50:7.2f} ms  p95 {c95:7.2f} ms (Chromium)")
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
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--personas", type=int, default=PERSONAS)
    parser.add_argument("--runs", type=int, default=RUNS, help="completed runs per persona")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state"
        started = time.perf_counter()
        events = fill(state, args.personas, args.runs)
        filled = time.perf_counter() - started
        app = build_app(RunOptions(state_dir=state), access=Access({TOKEN: "bench"}))
        client = TestClient(app)
        auth = {"Authorization": f"Bearer {TOKEN}"}
        started = time.perf_counter()
        html = client.get("/console", headers=auth).text
        warm = (time.perf_counter() - started) * 1000
        assert html.count("data-persona=") == args.personas
        runs = args.personas * args.runs
        print(f"{args.personas:,} personas, {runs:,} runs, {events:,} events (SQLite; "
              f"filled in {filled:.0f} s; first page, folding the log: {warm:.0f} ms)")  # fmt: skip
        persona = client.get("/api/personas/p0001?window=30d", headers=auth).json()
        assert sum(persona["series"]["runs"]["completed"]) == args.runs
        paths = {
            "/healthz (baseline)": "/healthz",
            "/metrics": "/metrics",
            "/api/fleet": "/api/fleet",
            "/console (fleet page)": "/console",
            "persona page (24h)": f"/console/personas/p{args.personas // 2:04d}",
            "persona page (30d)": f"/console/personas/p{args.personas // 2:04d}?window=30d",
        }
        results = interleaved(client, list(paths.values()), args.rounds, **auth)
        for label, path in paths.items():
            p50, p95, cpu = results[path]
            print(f"{label:24s} p50 {p50:7.2f} ms  p95 {p95:7.2f} ms  (CPU p50 {cpu:7.2f} ms)")
        p50, p95 = feed_latency(state, app)
        print(f"{'feed append -> SSE':24s} p50 {p50:7.2f} ms  p95 {p95:7.2f} ms")


if __name__ == "__main__":
    main()
