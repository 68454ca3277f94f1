"""The console in a real browser (Debian's Chromium driven by Playwright) on ``charter serve``.

A webhook arrives and the fleet page follows it live; the run parks on an approval
(giving its lease back), which is approved from the page by keyboard, and the run
completes; without the token the same pages and actions are refused. The persona page's
charts draw the numbers ``/api/personas/...`` returns, the run page's timeline bars are
the run record's calls; every page passes axe-core with no serious or critical violation,
in the light and the dark scheme. Screenshots (1280x800) land in ``test-artifacts/console/``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import signal
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import charter_argv, events, persona_toml

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
TOKEN = "alice-token-0123456789"
SECRET = "hook-secret"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"
MERGE = {
    "calls": [
        {"tool": "read", "args": {"path": "context/rules.md"}, "stage": "look"},
        {"tool": "bash", "args": {"command": "cat /etc/shadow"}, "stage": "look"},
        {"tool": "github", "args": {"action": "merge", "pr": 7}, "stage": "act"},
    ],
    "pull_request": {
        "number": 7,
        "title": "Fix the flaky test",
        "additions": 12,
        "deletions": 3,
        "changed_files": 2,
        "head": {"ref": "fix-flaky"},
        "base": {"ref": "main"},
    },
    "check_runs": [{"name": "ci / tests", "conclusion": "success"}],
    "agent": "Summarise pull request 7 for the maintainers",
    "handoffs": [{"kind": "findings", "payload": {"pr": 7, "why": "flaky test"}}],
}
ROUTES = """
[[handoff_routes]]
id = "findings"
kind = "findings"
from = "actor"
route = [{ target = "human:maintainers", when = "always" }]
"""

AXE = (
    Path(
        os.environ.get("CHARTER_AXE_DIR")
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "charter" / "axe"
    )
    / "node_modules"
    / "axe-core"
    / "axe.min.js"
)
VIEW = {"width": 1280, "height": 800}

if not CHROMIUM.exists() and os.environ.get("CI") != "true":
    pytest.skip("Debian's chromium is not installed (make browser)", allow_module_level=True)


def _axe(page: Any, where: str) -> None:
    """axe-core (``make axe``) on the page: no serious or critical violation."""
    if not AXE.exists():
        if os.environ.get("CI") == "true":
            raise AssertionError(f"axe-core is not installed at {AXE} (make axe)")
        return
    page.add_script_tag(path=str(AXE))
    result = page.evaluate("async () => await axe.run(document)")
    bad = [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"][:3]]}
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]
    assert not bad, f"{where}: {bad}"


@pytest.fixture
def served(make_pack: Callable[..., Path]) -> Iterator[tuple[Path, str]]:
    pack = make_pack(
        persona_toml(tier="act_with_approval", handoffs='["human:maintainers"]'), routes=ROUTES
    )
    env = {
        **os.environ,
        "CHARTER_WEBHOOK_SECRET_TEST": SECRET,
        "CHARTER_CONSOLE_TOKENS": f"alice:{TOKEN}",
    }
    argv = charter_argv(
        "serve", "--port", "0", "--manifest", str(pack), "--state-dir", str(pack / "state")
    )
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("listening on http://127.0.0.1:"), first + proc.stderr.read()
        yield pack, first.split()[2]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def _hook(base: str, plan: dict[str, Any]) -> int:
    body = json.dumps({"id": "w1", "type": "go", **plan}).encode()
    request = urllib.request.Request(f"{base}/hooks/test", data=body, method="POST")
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    request.add_header("X-Hub-Signature-256", signature)
    with urllib.request.urlopen(request, timeout=10) as response:
        return int(response.status)


def _marks(page: Any, selector: str) -> list[dict[str, str]]:
    """The data attributes of the SVG marks under ``selector`` as drawn in the browser."""
    return list(
        page.eval_on_selector_all(selector, "els => els.map(e => Object.assign({}, e.dataset))")
    )


def test_fleet_feed_and_approval_in_a_real_browser(served: tuple[Path, str]) -> None:
    from playwright.sync_api import expect, sync_playwright

    pack, base = served
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        try:
            # without the token: every page is refused, the approve action too
            anon = browser.new_context()
            page = anon.new_page()
            assert page.goto(f"{base}/console").status == 401  # type: ignore[union-attr]
            assert page.goto(f"{base}/console/approvals").status == 401  # type: ignore[union-attr]
            assert page.goto(f"{base}/console/personas/actor").status == 401  # type: ignore[union-attr]

            context = browser.new_context(viewport=VIEW, color_scheme="light")
            page = context.new_page()
            page.goto(f"{base}/console/login")
            page.get_by_label("Console token").fill(TOKEN)
            page.get_by_role("button", name="Sign in").click()
            row = page.locator('tr[data-persona="actor"]')
            expect(row.locator('[data-field="lifecycle"]')).to_have_text("inactive")

            # a trigger arrives: the live feed moves the row to running (parked on approval)
            assert _hook(base, MERGE) == 202
            scrape = urllib.request.Request(f"{base}/metrics")
            scrape.add_header("Authorization", f"Bearer {TOKEN}")
            with urllib.request.urlopen(scrape, timeout=10) as response:
                assert b"charter_admission_seconds_count 1.0" in response.read()
            # the run parks on its approval: it holds no lease (idle), one approval waits
            expect(page.locator("#pending-count")).to_have_text("1", timeout=20_000)
            expect(page.locator("#feed li").first).to_be_visible()
            expect(row.locator('[data-field="lifecycle"]')).to_have_text("idle")
            expect(row.locator('[data-field="approvals"]')).to_have_text("1")
            _axe(page, "fleet")

            page.get_by_role("link", name="Approvals").first.click()
            article = page.locator("article.approval")
            expect(page.get_by_role("heading", name="actor wants github")).to_be_visible()
            # the evidence: what asks (the tier, as frame and rule) and what it would change
            expect(article.locator(".asks")).to_contain_text("autonomy tier act_with_approval")
            expect(article.locator(".asks")).to_contain_text("autonomy_tier = act_with_approval")
            expect(article).to_contain_text("Merges pull request #7: Fix the flaky test")
            expect(article.locator(".pr-summary")).to_contain_text("2 files changed")
            expect(article.locator(".checks")).to_contain_text("ci / tests")
            page.screenshot(path=str(ARTIFACTS / "approvals.png"), full_page=True)
            _axe(page, "approvals")

            # the same POST without the token (another context, no cookie) is refused
            form = page.locator("form[action^='/console/approvals/']")
            action = str(form.get_attribute("action"))
            csrf = str(page.locator("input[name=csrf]").get_attribute("value"))
            refused = anon.request.post(f"{base}{action}",
                                        form={"decision": "approve", "csrf": csrf})  # fmt: skip
            assert refused.status == 401
            assert not any(e["kind"] == "persona.approval.granted" for e in events(pack))

            # by keyboard: a reason, then j selects the request and a approves it once
            # the confirmation is accepted (a dismissed one changes nothing)
            page.get_by_label("Reason").fill("reviewed on the console")
            page.locator("h1").click()
            page.keyboard.press("j")
            expect(article).to_have_class("approval selected")
            page.once("dialog", lambda dialog: dialog.dismiss())
            page.keyboard.press("a")
            page.wait_for_timeout(300)
            assert not any(e["kind"] == "persona.approval.granted" for e in events(pack))
            asked: list[str] = []

            def accept(dialog: Any) -> None:
                asked.append(dialog.message)
                dialog.accept()

            page.once("dialog", accept)
            page.keyboard.press("a")
            expect(page.get_by_role("status")).to_contain_text("granted")
            assert asked == ["Approve: actor wants github?"]

            page.get_by_role("link", name="Fleet").click()
            last = page.locator('tr[data-persona="actor"] [data-field="last_run"] a')
            expect(last).to_have_text("completed", timeout=20_000)
            expect(row.locator('[data-field="lifecycle"]')).to_have_text("idle")
            # relative time, the exact time on hover
            when = row.locator('[data-field="last_run"] time')
            expect(when).to_have_text(re.compile(r"^\d+ s ago$"))
            assert re.match(r"^\d{4}-\d\d-\d\dT", str(when.get_attribute("title")))
            expect(row.locator('[data-field="runs24"] svg rect[data-value="1"]')).to_have_count(1)
            page.screenshot(path=str(ARTIFACTS / "fleet-live.png"), full_page=False)
            last.click()
            expect(page.locator("#receipts")).to_contain_text("persona.approval.granted")
            expect(page.locator("#receipts")).to_contain_text("console:alice")
            expect(page.locator("#run-status")).to_have_text("completed")
            expect(page.locator("#chain")).to_contain_text("intact")
            # the agent's conversation is on the run page, from the log
            transcript = page.locator("section.transcript")
            expect(transcript).to_contain_text("Summarise pull request 7 for the maintainers")
            expect(transcript.locator("li.role-assistant").first).to_be_visible()
            # the timeline's bars are the run record's calls, at the record's times
            run_id = page.url.rsplit("/", 1)[1]
            api = page.request.get(f"{base}/api/runs/{run_id}").json()
            (ARTIFACTS / "run.json").write_text(json.dumps(api["timeline"], indent=2))
            calls = api["record"]["tool_calls"]
            assert [c["tool"] for c in calls] == ["read", "bash", "github"]
            bars = {m["key"]: m for m in _marks(page, "svg.timeline rect.bar")}
            spans = {s["key"]: s for s in api["timeline"]["spans"]}
            assert {c["call_id"] for c in calls} <= set(bars)
            assert set(bars) == set(spans)
            for key, span in spans.items():
                assert float(bars[key]["start"]) == pytest.approx(span["start"], abs=1e-6)
                assert float(bars[key]["end"]) == pytest.approx(span["end"], abs=1e-6)
            classes = page.eval_on_selector_all(
                "svg.timeline rect.bar[data-kind=tool]",
                "els => els.map(e => e.dataset.key + ' ' + e.getAttribute('class'))",
            )
            assert sorted(classes) == [
                "call_1 bar denied",
                "call_2 bar asked",
                "read_1 bar allowed",
            ]
            assert any(s["kind"] == "model" for s in spans.values())
            expect(page.locator("#calls")).to_contain_text("by console:alice")
            page.screenshot(path=str(ARTIFACTS / "run.png"), full_page=False)
            _axe(page, "run")

            # the persona page: its charts draw the API's series
            page.goto(f"{base}/console/personas/actor")
            series = page.request.get(f"{base}/api/personas/actor?window=24h").json()["series"]
            drawn = {
                f"{m['series']}:{m['index']}": float(m["value"])
                for m in _marks(page, "#chart-runs rect[data-series]")
            }
            expected = {
                f"{name}:{i}": float(v)
                for name, values in series["runs"].items()
                for i, v in enumerate(values)
                if v
            }
            assert drawn == expected and sum(expected.values()) == 1
            spend = [(int(m["index"]), float(m["value"]))
                     for m in _marks(page, "#chart-spend rect[data-index]")]  # fmt: skip
            assert spend == [(i, v) for i, v in enumerate(series["spend_usd"])]
            expect(page.locator("#policy")).to_contain_text("tools")
            page.screenshot(path=str(ARTIFACTS / "persona.png"), full_page=False)
            _axe(page, "persona")
            # pause, with a confirmation, recorded as the token's name
            page.get_by_text("Pause…").click()
            page.get_by_role("button", name="Yes, pause actor").click()
            expect(page.locator("#lifecycle")).to_have_text("paused")
            expect(page.get_by_role("status")).to_contain_text("console:alice")

            # the human: handoff waits in the inbox; acknowledging it is recorded once
            page.get_by_role("link", name="Inbox").first.click()
            item = page.locator("article.inbox-item")
            expect(item).to_contain_text("flaky test")
            expect(item).to_contain_text("human:maintainers")
            _axe(page, "inbox")
            item.get_by_label("Note").fill("seen, will fix")
            item.get_by_role("button", name="Acknowledge").click()
            expect(page.get_by_role("status")).to_be_visible()
            expect(page.locator("#inbox-empty")).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "inbox.png"), full_page=True)

            # keyboard on the fleet: j selects the first row's link; sorting by spend
            page.goto(f"{base}/console")
            page.keyboard.press("j")
            focused = page.evaluate("document.activeElement.textContent")
            assert focused == "actor"

            # the dark scheme follows the system setting, on every page
            bearer = {"Authorization": f"Bearer {TOKEN}"}
            dark = browser.new_context(viewport=VIEW, color_scheme="dark",
                                       extra_http_headers=bearer)  # fmt: skip
            night = dark.new_page()
            for path in ("/console", "/console/personas/actor", f"/console/runs/{run_id}",
                         "/console/approvals"):  # fmt: skip
                night.goto(f"{base}{path}")
                background = night.evaluate("getComputedStyle(document.body).backgroundColor")
                assert background == "rgb(18, 18, 18)", (path, background)
                _axe(night, f"{path} (dark)")
            night.goto(f"{base}/console/runs/{run_id}")
            night.screenshot(path=str(ARTIFACTS / "run-dark.png"), full_page=False)
            dark.close()

            # a phone: tables scroll inside their wrappers, the page itself does not
            page.set_viewport_size({"width": 390, "height": 844})
            for path, shot in (("/console", "fleet-phone.png"),
                               ("/console/personas/actor", "persona-phone.png"),
                               (f"/console/runs/{run_id}", "run-phone.png")):  # fmt: skip
                page.goto(f"{base}{path}")
                width = page.evaluate("document.documentElement.scrollWidth")
                assert width <= 390, (path, width)
                page.screenshot(path=str(ARTIFACTS / shot), full_page=True)
        finally:
            browser.close()
    granted = [e for e in events(pack) if e["kind"] == "persona.approval.granted"]
    assert [g["payload"]["by"] for g in granted] == ["console:alice"]
    assert granted[0]["payload"]["reason"] == "reviewed on the console"
    assert any(e["kind"] == "persona.tool.executed" for e in events(pack))
    (transcript,) = [e for e in events(pack) if e["kind"] == "persona.run.transcript"]
    assert transcript["payload"]["agents"][0]["messages"][0]["role"] == "user"
    acked = [e for e in events(pack) if e["kind"] == "persona.human_inbox.acknowledged"]
    assert len(acked) == 1 and "console:alice" in json.dumps(acked[0]["payload"])
    (paused,) = [e for e in events(pack) if e["kind"] == "persona.paused"]
    assert paused["actor"] == "console:alice"


FLEET = (
    ("triage", "act_auto", "{ daily_usd = 2.0, hourly_usd = 0.5 }"),
    ("reviewer", "act_with_approval", "{ daily_usd = 5.0 }"),
    ("release-notes", "suggest", "{ daily_usd = 1.0 }"),
    ("dependabot-merger", "act_with_approval", "{ daily_usd = 0.8 }"),
    ("docs-fixer", "shadow", "{ daily_usd = 0.5 }"),
    ("flaky-test-hunter", "act_auto", "{ daily_usd = 3.0 }"),
)


@pytest.fixture
def fleet(make_pack: Callable[..., Path]) -> Iterator[tuple[Path, str]]:
    """A fleet with a day of history (written by the runtime at times before now), one
    persona paused, served by ``charter console`` on its state and manifest."""
    from datetime import UTC, datetime, timedelta

    from charter.run.session import load_checked_manifest, runtime_specs
    from charter.runtime import PersonaRuntime, open_event_log

    pack = make_pack(*(persona_toml(n, tier=t, budget=b) for n, t, b in FLEET))
    specs, _ = runtime_specs(load_checked_manifest(pack))
    log = open_event_log(state_dir=pack / "state")
    runtime = PersonaRuntime(log, specs)
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    for k, (name, _tier, _budget) in enumerate(FLEET):
        for hour in range(23, -1, -1):
            for minute in range(((hour * 7 + k * 3) % 4) + (2 if hour < 6 else 0)):
                at = now - timedelta(hours=hour, minutes=minute + 1)
                failed = (hour + minute + k) % 9 == 0
                cost = round(0.0007 * (1 + (hour * 5 + minute + k) % 6) * (k + 1), 4)
                runtime.tick(name, at=at, cost_usd=cost, tokens=int(cost * 100_000),
                             error="the model provider timed out" if failed else None)  # fmt: skip
    runtime.pause("docs-fixer", at=now - timedelta(minutes=30))
    log.close()
    env = {**os.environ, "CHARTER_CONSOLE_TOKENS": f"alice:{TOKEN}"}
    argv = charter_argv("console", "--port", "0", "--manifest", str(pack),
                        "--state-dir", str(pack / "state"))  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("console on http://127.0.0.1:"), first + proc.stderr.read()
        yield pack, first.split()[2].removesuffix("/console")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def test_fleet_of_personas_sorts_filters_and_draws_a_day(fleet: tuple[Path, str]) -> None:
    """A day of six personas: the sparklines draw the API's hours, the spend bars its caps,
    sorting and filtering work on the page; the screenshots the README shows."""
    from playwright.sync_api import expect, sync_playwright

    _pack, base = fleet
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        try:
            context = browser.new_context(
                viewport=VIEW, extra_http_headers={"Authorization": f"Bearer {TOKEN}"}
            )
            page = context.new_page()
            page.goto(f"{base}/console")
            api = {p["name"]: p for p in page.request.get(f"{base}/api/fleet").json()["personas"]}
            rows = page.locator("#fleet tbody tr")
            expect(rows).to_have_count(len(FLEET))
            for name, row in api.items():
                cell = f'tr[data-persona="{name}"] [data-field="{{}}"] rect[data-value]'
                for field, key in (("runs24", "runs"), ("spend24", "spend_usd")):
                    # one bar per hour with something in it, at its hour
                    drawn = {int(m["index"]): float(m["value"])
                             for m in _marks(page, cell.format(field))}  # fmt: skip
                    api_hours = {i: v for i, v in enumerate(row["sparklines"][key]) if v}
                    assert drawn == pytest.approx(api_hours), (name, field)
                    assert sum(row["sparklines"][key]) > 0
            # sorting by today's spend (twice: descending), then filtering by name
            page.get_by_role("button", name="Spend today").click()
            page.get_by_role("button", name="Spend today").click()
            names = rows.evaluate_all("rs => rs.map(r => r.dataset.persona)")
            by_spend = sorted(api, key=lambda n: -api[n]["budget"]["spent"]["day_usd"])
            assert names == by_spend
            expect(page.locator("th[aria-sort=descending]")).to_have_text("Spend today")
            expect(page.locator('tr[data-persona="docs-fixer"] [data-field="lifecycle"]')
                   ).to_have_text("paused")  # fmt: skip
            page.screenshot(path=str(ARTIFACTS / "fleet.png"), full_page=False)
            page.get_by_label("Find persona").fill("re")
            shown = "rs => rs.filter(r => !r.hidden).map(r => r.dataset.persona)"
            visible = rows.evaluate_all(shown)
            assert sorted(visible) == ["release-notes", "reviewer"]
            _axe(page, "fleet of six")

            page.goto(f"{base}/console/personas/triage?window=7d")
            series = page.request.get(f"{base}/api/personas/triage?window=7d").json()["series"]
            cap = page.eval_on_selector("#chart-spend line.cap", "e => e.dataset.value")
            assert float(cap) == series["spend_cap_usd"] == 2.0
            spend = [float(m["value"]) for m in _marks(page, "#chart-spend rect[data-index]")]
            assert spend == pytest.approx(series["spend_usd"])
            page.screenshot(path=str(ARTIFACTS / "persona-week.png"), full_page=False)
            _axe(page, "persona 7d")
        finally:
            browser.close()
