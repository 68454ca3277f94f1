"""The console in a real browser (Debian's Chromium driven by Playwright) on ``charter serve``.

A webhook arrives and the fleet page follows it live; the run parks on an approval
(giving its lease back), which is approved from the page, and the run completes; without
the token the same pages and actions are refused. Screenshots land in ``test-artifacts/console/``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
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
    "calls": [{"tool": "github", "args": {"action": "merge", "pr": 7}, "stage": "act"}],
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

if not CHROMIUM.exists() and os.environ.get("CI") != "true":
    pytest.skip("Debian's chromium is not installed (make browser)", allow_module_level=True)


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

            context = browser.new_context(viewport={"width": 1100, "height": 800})
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
            page.screenshot(path=str(ARTIFACTS / "fleet.png"), full_page=True)

            page.get_by_role("link", name="Approvals").first.click()
            expect(page.get_by_role("heading", name="actor wants github")).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "approvals.png"), full_page=True)

            # the same POST without the token (another context, no cookie) is refused
            form = page.locator("form[action^='/console/approvals/']")
            action = str(form.get_attribute("action"))
            csrf = str(page.locator("input[name=csrf]").get_attribute("value"))
            refused = anon.request.post(f"{base}{action}",
                                        form={"decision": "approve", "csrf": csrf})  # fmt: skip
            assert refused.status == 401
            assert not any(e["kind"] == "persona.approval.granted" for e in events(pack))

            page.get_by_label("Reason").fill("reviewed on the console")
            page.get_by_role("button", name="Approve").click()
            expect(page.get_by_role("status")).to_contain_text("granted")

            page.get_by_role("link", name="Fleet").click()
            last = page.locator('tr[data-persona="actor"] [data-field="last_run"] a')
            expect(last).to_have_text("completed", timeout=20_000)
            expect(row.locator('[data-field="lifecycle"]')).to_have_text("idle")
            last.click()
            expect(page.locator("#receipts")).to_contain_text("persona.approval.granted")
            expect(page.locator("#receipts")).to_contain_text("console:alice")
            expect(page.locator("#run-status")).to_have_text("completed")
            # the agent's conversation is on the run page, from the log
            transcript = page.locator("section.transcript")
            expect(transcript).to_contain_text("Summarise pull request 7 for the maintainers")
            expect(transcript.locator("li.role-assistant").first).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "run.png"), full_page=True)

            # the human: handoff waits in the inbox; acknowledging it is recorded once
            page.get_by_role("link", name="Inbox").first.click()
            item = page.locator("article.inbox-item")
            expect(item).to_contain_text("flaky test")
            expect(item).to_contain_text("human:maintainers")
            item.get_by_label("Note").fill("seen, will fix")
            item.get_by_role("button", name="Acknowledge").click()
            expect(page.get_by_role("status")).to_be_visible()
            expect(page.locator("#inbox-empty")).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "inbox.png"), full_page=True)
            # a phone: the table scrolls inside its wrapper, the page itself does not
            page.set_viewport_size({"width": 390, "height": 844})
            page.goto(f"{base}/console")
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, width
            page.screenshot(path=str(ARTIFACTS / "fleet-phone.png"), full_page=True)
        finally:
            browser.close()
    granted = [e for e in events(pack) if e["kind"] == "persona.approval.granted"]
    assert [g["payload"]["by"] for g in granted] == ["console:alice"]
    assert any(e["kind"] == "persona.tool.executed" for e in events(pack))
    (transcript,) = [e for e in events(pack) if e["kind"] == "persona.run.transcript"]
    assert transcript["payload"]["agents"][0]["messages"][0]["role"] == "user"
    acked = [e for e in events(pack) if e["kind"] == "persona.human_inbox.acknowledged"]
    assert len(acked) == 1 and "console:alice" in json.dumps(acked[0]["payload"])
