"""The console's persona and run pages, their ``/api`` series, and approval evidence.

The charts' numbers are compared with the events in the log (counted here independently),
the timeline's bars with the run record, and the controls with the events they append.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from charter.run import RunOptions, open_session
from charter.run.promotion import wilson
from charter.run.web import Access, build_app
from charter.run.web.change import would_change
from charter.runtime import parse_time

from .conftest import envelope, events, persona_cli
from .test_rollout import START, review_requested, run_at, write_pack

TOKEN = "alice-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _client(options: RunOptions) -> Any:
    from starlette.testclient import TestClient

    return TestClient(build_app(options, access=Access({TOKEN: "alice"})))


def _values(html: str, figure: str, attr: str = "data-value") -> list[tuple[str, float]]:
    """``(data-index or data-series:index, value)`` of the marks inside ``<figure id=...>``."""
    part = html.split(f'<figure id="{figure}">')[1].split("</figure>")[0]
    out = []
    for mark in re.finditer(r"<(rect|circle)\b([^>]*)>", part):
        attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', mark.group(2)))
        if attr in attrs and "data-index" in attrs:
            key = f"{attrs.get('data-series', '')}:{attrs['data-index']}"
            out.append((key, float(attrs[attr])))
    return out


def _month(session: Any, count: int) -> Any:
    """``count`` shadow reviews 3 hours apart, each judged by a person (``persona
    feedback``) the same day: 3 in 4 agreed."""
    from charter.run import promotion

    persona = next(p for p in session.manifest.personas if p.name == "reviewer")
    at = START
    for i in range(count):
        at = START + timedelta(hours=3 * i)
        result = run_at(session, at, review_requested(("acme/api", "acme/web")[i % 2], i + 1,
                                                      "approve"))  # fmt: skip
        assert result.status == "completed" and result.autonomy["effective"] == "shadow"
        promotion.feedback(session.runtime, session.log, persona, str(result.run_id),
                           agree=i % 4 != 3, at=at + timedelta(hours=1))  # fmt: skip
    return at + timedelta(hours=2)


def test_persona_page_charts_equal_the_log_and_controls_are_recorded(tmp_path: Path) -> None:
    pack = write_pack(tmp_path / "pack")
    session = open_session(RunOptions(manifest=pack, state_dir=pack / "state", at=START))
    try:
        end = _month(session, 200)
    finally:
        session.close()
    client = _client(RunOptions(manifest=pack, state_dir=pack / "state", at=end))
    assert client.get("/api/personas/reviewer").status_code == 401  # a token is needed
    data = client.get("/api/personas/reviewer?window=30d", headers=AUTH).json()
    series = data["series"]
    assert len(series["buckets"]) == 30 and series["unit"] == "day"

    # runs per day and spend per day, counted here from the log's own events
    log = events(pack)
    completed: dict[str, int] = {}
    for e in log:
        if e["kind"] == "persona.run.completed":
            day = e["occurred_at"][:10]
            completed[day] = completed.get(day, 0) + 1
    days = [b[:10] for b in series["buckets"]]
    assert series["runs"]["completed"] == [completed.get(d, 0) for d in days]
    assert sum(series["runs"]["completed"]) == 200
    # agreement per day: its Wilson interval, the same function the report uses
    daily = data["rollout"]["daily"]
    for agreed, judged, rate, low, high in zip(
        daily["agreed"], daily["judged"], daily["rate"], daily["wilson_low"],
        daily["wilson_high"], strict=True,
    ):  # fmt: skip
        if judged:
            w_low, w_high = wilson(agreed, judged)
            assert (rate, low, high) == (
                round(agreed / judged, 4), round(w_low, 4), round(w_high, 4)
            )  # fmt: skip
        else:
            assert rate is None and low is None
    assert sum(daily["agreed"]) == data["rollout"]["total"]["agreement"]["agreed"]
    assert data["rollout"]["promotion"]["eligible"] is True, data["rollout"]["promotion"]

    # the page draws exactly those numbers (the browser test checks the same in Chromium)
    page = client.get("/console/personas/reviewer?window=30d", headers=AUTH)
    assert page.status_code == 200
    drawn = dict(_values(page.text, "chart-runs"))
    expected = {
        f"{name}:{i}": float(v)
        for name, values in series["runs"].items()
        for i, v in enumerate(values)
        if v
    }
    assert drawn == expected
    rates = _values(page.text, "chart-agreement")
    assert [v for _, v in rates] == [r for r in daily["rate"] if r is not None]
    assert 'data-value="0.6"' in page.text  # the min_agreement threshold line
    glance = page.text.split('class="glance"')[1].split("</dl>")[0]
    assert "act_with_approval" in glance and "repository:acme/api" in glance
    assert "paths" in page.text.split('id="policy"')[1][:2000]  # policy show's dimensions
    assert client.get("/api/personas/reviewer?window=1y", headers=AUTH).status_code == 400
    assert client.get("/api/personas/nobody", headers=AUTH).status_code == 404

    # controls: CSRF needed, nothing changes without it; each is recorded with who
    csrf = page.text.split('name="csrf" value="')[1].split('"')[0]
    url = "/console/personas/reviewer/control"
    before = len(events(pack))
    assert client.post(url, data={"action": "pause"}, headers=AUTH).status_code == 403
    assert client.post(url, data={"action": "pause", "csrf": csrf}).status_code == 401
    assert len(events(pack)) == before
    done = client.post(url, data={"action": "promote", "to": "suggest", "csrf": csrf},
                       headers={**AUTH, "Accept": "application/json"})  # fmt: skip
    assert done.status_code == 200, done.text
    (promoted,) = [e for e in events(pack) if e["kind"] == "persona.autonomy.promoted"]
    assert promoted["payload"]["by"] == "console:alice" and promoted["payload"]["to"] == "suggest"
    again = client.post(url, data={"action": "promote", "to": "suggest", "csrf": csrf},
                        headers={**AUTH, "Accept": "application/json"})  # fmt: skip
    assert again.status_code == 409 and "already runs at suggest" in again.json()["error"]
    paused = client.post(url, data={"action": "pause", "csrf": csrf}, headers=AUTH,
                         follow_redirects=False)  # fmt: skip
    assert paused.status_code == 303 and "console%3Aalice" in paused.headers["location"]
    (event,) = [e for e in events(pack) if e["kind"] == "persona.paused"]
    assert event["actor"] == "console:alice"
    page = client.get("/console/personas/reviewer", headers=AUTH).text
    assert '<span class="state state-paused" id="lifecycle">paused</span>' in page
    client.post(url, data={"action": "resume", "csrf": csrf}, headers=AUTH)
    (event,) = [e for e in events(pack) if e["kind"] == "persona.resumed"]
    assert event["actor"] == "console:alice"
    bad = client.post(url, data={"action": "disable", "csrf": csrf},
                      headers={**AUTH, "Accept": "application/json"})  # fmt: skip
    assert bad.status_code == 409 and "pause, resume or promote" in bad.json()["error"]


PLAN = {
    "calls": [
        {"tool": "read", "args": {"path": "context/rules.md"}, "stage": "look"},
        {"tool": "bash", "args": {"command": "echo hi"}, "stage": "look"},
        {"tool": "github", "args": {"action": "merge", "pr": 7}, "stage": "act"},
    ]
}


def test_run_record_keeps_every_tool_call_and_the_timeline_draws_it(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    pack = make_pack()
    result = persona_cli(
        pack, "run", "actor", "--payload", str(envelope(tmp_path / "e.json", PLAN)), "--json"
    )
    assert result.exit_code == 0, result.output
    run_id = json.loads(result.stdout)["run_id"]
    (recorded,) = [e for e in events(pack) if e["kind"] == "persona.run.recorded"]
    calls = recorded["payload"]["record"]["tool_calls"]
    # the read-only call is in the record now (it was not before), with its timing
    assert [(c["call_id"], c["tool"]) for c in calls] == [
        ("read_1", "read"), ("call_1", "bash"), ("call_2", "github")
    ]  # fmt: skip
    assert calls[0]["status"] == "ok" and calls[0]["side_effect_level"] == "read_only"
    assert calls[1]["decision"]["decision"] == "deny" and calls[1]["stage"] == "look"
    assert calls[2]["executed"] is True
    for c in calls:
        assert parse_time(c["started_at"]) <= parse_time(c["ended_at"])
    # the approval ids and replay still count side-effecting calls only: call_2 executed
    executing = [e for e in events(pack) if e["kind"] == "persona.tool.executing"]
    assert [e["payload"]["call_id"] for e in executing] == ["call_2"]

    client = _client(RunOptions(manifest=pack, state_dir=pack / "state"))
    run = client.get(f"/api/runs/{run_id}", headers=AUTH).json()
    timeline = run["timeline"]
    origin = parse_time(timeline["started_at"])
    tools = [s for s in timeline["spans"] if s["kind"] == "tool"]
    assert [s["key"] for s in tools] == [c["call_id"] for c in calls]
    for span, call in zip(tools, calls, strict=True):
        start = (parse_time(call["started_at"]) - origin).total_seconds()
        end = (parse_time(call["ended_at"]) - origin).total_seconds()
        assert (span["start"], span["end"]) == (round(start, 6), round(end, 6))
    assert [s["decision"] for s in tools] == ["allowed", "denied", "allowed"]
    assert tools[1]["rule"]  # denied with the rule that denied it
    stages = {s["label"] for s in timeline["spans"] if s["kind"] == "stage"}
    assert stages == {"stage look", "stage act"}
    page = client.get(f"/console/runs/{run_id}", headers=AUTH).text
    for call in calls:
        assert f'data-key="{call["call_id"]}"' in page
    assert 'class="bar denied"' in page and "intact" in page
    assert 'aria-label="Timeline of run ' in page


def test_approval_evidence_diffs_inside_the_workspace_only(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("one\ntwo\n")
    change = would_change("write", {"path": "notes.txt", "content": "one\nTWO\n"},
                          workspace=workspace)  # fmt: skip
    assert change is not None and change["kind"] == "file" and not change["new_file"]
    assert "-two\n" in change["diff"] and "+TWO\n" in change["diff"]
    fresh = would_change("write", {"path": "new.txt", "content": "x\n"}, workspace=workspace)
    assert fresh is not None and fresh["new_file"] and "+x\n" in fresh["diff"]
    edit = would_change("edit", {"path": "notes.txt", "old_string": "one", "new_string": "1"},
                        workspace=workspace)  # fmt: skip
    assert edit is not None and "-one\n" in edit["diff"] and "+1\n" in edit["diff"]
    # hostile: a path through a symlink or .. to a file outside the workspace is not read
    secret = tmp_path / "secret.txt"
    secret.write_text("the-secret-value\n")
    (workspace / "link").symlink_to(secret)
    for path in ("link", "../secret.txt"):
        out = would_change("write", {"path": path, "content": "x"}, workspace=workspace)
        assert out is not None and out["diff"] is None and "outside the workspace" in out["note"]
        assert "the-secret-value" not in json.dumps(out)
    command = would_change("bash", {"command": "rm -rf build"}, workspace=workspace)
    assert command == {"kind": "command", "command": "rm -rf build", "cwd": None}
    trigger = {"payload": {"pull_request": {"number": 7, "title": "Fix", "additions": 3,
               "deletions": 1, "changed_files": 2, "head": {"ref": "fix"},
               "base": {"ref": "main"}}, "check_runs": [{"name": "ci",
               "conclusion": "success"}]}}  # fmt: skip
    merge = would_change("github", {"action": "merge", "pr": 7}, workspace=None, trigger=trigger)
    assert merge is not None and merge["pull_request"]["additions"] == 3
    assert merge["pull_request"]["checks"] == [{"name": "ci", "conclusion": "success"}]


def test_fleet_sparklines_count_the_last_24_hours(make_pack: Callable[..., Path]) -> None:
    from charter.runtime import PersonaRuntime, PersonaRuntimeSpec, open_event_log

    pack = make_pack()
    now = START + timedelta(days=2)
    log = open_event_log(state_dir=pack / "state")
    runtime = PersonaRuntime(log, [PersonaRuntimeSpec("actor", "1.0.0")])
    for hours_ago, minute, cost in ((30, 1, 0.5), (5, 1, 0.25), (5, 2, 0.125), (0, 0, 0.0625)):
        at = now - timedelta(hours=hours_ago) + timedelta(minutes=minute)
        runtime.tick("actor", at=at, cost_usd=cost)
    log.close()
    client = _client(RunOptions(manifest=pack, state_dir=pack / "state", at=now))
    fleet = client.get("/api/fleet", headers=AUTH).json()
    (row,) = fleet["personas"]
    # 30 hours ago is outside the window; the rest in their hours, newest last
    assert sum(row["sparklines"]["runs"]) == 3
    assert row["sparklines"]["runs"][-1] == 1 and row["sparklines"]["runs"][-6] == 2
    assert row["sparklines"]["spend_usd"][-6] == 0.375
    assert fleet["sparkline_hours"][-1].startswith(now.strftime("%Y-%m-%dT%H"))
    html = client.get("/console", headers=AUTH).text
    assert 'href="/console/personas/actor"' in html and "3 runs in the last 24 hours" in html

    # charter console alone on the state (no manifest): the same series, no charter, and a
    # promotion is refused with why (the criteria are in the manifest it was not given)
    alone = _client(RunOptions(state_dir=pack / "state", at=now))
    data = alone.get("/api/personas/actor", headers=AUTH).json()
    assert data["charter"] is None and sum(data["series"]["runs"]["completed"]) == 3
    page = alone.get("/console/personas/actor", headers=AUTH)
    assert page.status_code == 200 and "started without the manifest" in page.text
    csrf = page.text.split('name="csrf" value="')[1].split('"')[0]
    refused = alone.post("/api/personas/actor/control",
                         data={"action": "promote", "to": "act_auto", "csrf": csrf},
                         headers={**AUTH, "Accept": "application/json"})  # fmt: skip
    assert refused.status_code == 409 and "--manifest" in refused.json()["error"]


def test_timeline_breaks_its_axis_at_a_long_wait() -> None:
    """Calls a millisecond apart after a 10-minute wait for a person stay apart on the page."""
    from charter.run.web import charts

    def span(key: str, kind: str, start: float, end: float) -> dict[str, Any]:
        return {"key": key, "kind": kind, "start": start, "end": end, "label": key,
                "cls": "allowed", "title": key}  # fmt: skip

    spans = [
        span("approval_call_1", "approval", 0.01, 600.0),
        span("read_1", "tool", 600.001, 600.002),
        span("call_1", "tool", 600.003, 600.004),
    ]
    svg = str(charts.timeline(spans, 600.005, "run"))
    found = re.findall(r'<rect class="bar [^"]*" x="([\d.]+)"[^>]*?data-key="(\w+)"', svg)
    bars = {key: float(x) for x, key in found}
    assert len(bars) == 3
    assert bars["call_1"] - bars["read_1"] > 50  # 2 ms apart, far apart on the axis
    assert 'class="gap"' in svg and "+10.0 min" in svg  # the wait, marked


def test_fleet_follows_a_log_that_was_empty_at_the_first_page(
    make_pack: Callable[..., Path],
) -> None:
    """Held states are used only while the log has nothing newer of a persona (a first
    page over an empty log once kept every later page at that first state)."""
    from charter.runtime import PersonaRuntime, PersonaRuntimeSpec, open_event_log

    pack = make_pack()
    log = open_event_log(state_dir=pack / "state")
    client = _client(RunOptions(manifest=pack, state_dir=pack / "state"))
    (row,) = client.get("/api/fleet", headers=AUTH).json()["personas"]
    assert row["last_run"] is None and row["lifecycle"] == "inactive"
    runtime = PersonaRuntime(log, [PersonaRuntimeSpec("actor", "1.0.0")])
    for k in range(2):
        runtime.tick("actor", at=START + timedelta(minutes=k), cost_usd=0.25)
        (row,) = client.get("/api/fleet", headers=AUTH).json()["personas"]
        assert row["last_run"]["status"] == "completed"
        assert row["counters"]["runs_completed"] == k + 1
    log.close()


def test_an_approval_shows_the_tools_preview_request(make_pack: Callable[..., Path]) -> None:
    """A tool with a preview (charter.tools.github's writes) records the exact request in
    its approval request; the approvals page shows it beside the call."""
    from charter.runtime import PersonaRuntime, PersonaRuntimeSpec, open_event_log

    pack = make_pack()
    log = open_event_log(state_dir=pack / "state")
    runtime = PersonaRuntime(log, [PersonaRuntimeSpec("actor", "1.0.0")])
    request = {"method": "PUT", "url": "/repos/acme/web/pulls/7/merge", "json": {"sha": "abc"}}
    runtime.transact(START, lambda b: b.emit("actor", "persona.approval.requested", {
        "run_id": "run_9", "call_id": "call_1", "approval_id": "run_9:call_1",
        "tool": "github_merge_pull_request", "arguments": {"pull_number": 7},
        "side_effect_level": "network", "stage": None, "request": request,
        "decision": {"decision": "ask", "tool": "github_merge_pull_request", "reason": "tier",
                     "frame": None, "dimension": None, "rule": None},
    }))  # fmt: skip
    log.close()
    client = _client(RunOptions(manifest=pack, state_dir=pack / "state", at=START))
    (item,) = client.get("/api/approvals", headers=AUTH).json()
    assert item["request"] == request
    assert item["change"]["kind"] == "merge" and item["change"]["pr"] == 7
    page = client.get("/console/approvals", headers=AUTH).text
    assert "the tool's preview" in page and "/repos/acme/web/pulls/7/merge" in page
