"""Slack (slack-sdk) and PagerDuty (pagerduty) tools against their fakes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from charter.testing import Fakes, serve_fakes
from charter.tools import IntegrationSettings, RetryPolicy
from charter.tools.pagerduty import PagerDutyClient, pagerduty_tools
from charter.tools.slack import SlackClient, slack_tools

from .conftest import ROOT

FAST = RetryPolicy(attempts=3, wait_initial=0.01, wait_max=0.05, jitter=0.05, max_wait=5)


@pytest.fixture
def fakes() -> Iterator[Fakes]:
    with serve_fakes(ROOT / "examples/personas/fixtures/fakes.json") as f:
        yield f


def slack(fakes: Fakes, **env: str) -> dict[str, Any]:
    settings = IntegrationSettings.load({**fakes.env(), **env})
    return {t.name: t for t in slack_tools(SlackClient(settings.slack, retry=FAST))}


def pagerduty(fakes: Fakes, **env: str) -> dict[str, Any]:
    settings = IntegrationSettings.load({**fakes.env(), **env})
    return {t.name: t for t in pagerduty_tools(PagerDutyClient(settings.pagerduty))}


def test_post_a_thread_and_react(fakes: Fakes) -> None:
    tools = slack(fakes)
    first = tools["slack_post_message"].handler(channel="#incidents", text="checkout is down")
    assert first["status"] == "ok" and first["channel"] == "C0INCIDENTS" and first["request_id"]
    reply = tools["slack_post_message"].handler(
        channel="#incidents", text="rolled back", thread_ts=first["ts"]
    )
    assert reply["thread_ts"] == first["ts"]
    got = tools["slack_add_reaction"].handler(
        channel="#incidents", timestamp=first["ts"], name=":eyes:"
    )
    assert got["status"] == "ok"
    assert [m["thread_ts"] for m in fakes.slack.messages] == [None, first["ts"]]
    assert fakes.slack.reactions == [{"channel": "C0INCIDENTS", "ts": first["ts"], "name": "eyes"}]
    sent = fakes.slack.requests_to("POST", "/api/chat.postMessage")[0]
    assert sent.headers["authorization"] == "Bearer xoxb-charter-fake-token"


def test_slack_errors_and_rate_limits(fakes: Fakes) -> None:
    tools = slack(fakes)
    got = tools["slack_post_message"].handler(channel="#nowhere", text="x")
    assert got["error"] == "not_found" and got["message"] == "channel_not_found"
    fakes.slack.rate_limit_next("chat.postMessage", retry_after=1)
    assert tools["slack_post_message"].handler(channel="#incidents", text="y")["status"] == "ok"
    assert len(fakes.slack.requests_to("POST", "/api/chat.postMessage")) == 3
    bad = slack(fakes, SLACK_BOT_TOKEN="xoxb-wrong")["slack_post_message"]
    got = bad.handler(channel="#incidents", text="z")
    assert got["error"] == "unauthorized" and "xoxb-wrong" not in repr(got)


def test_pagerduty_acknowledge_note_resolve_and_trigger(fakes: Fakes) -> None:
    tools = pagerduty(fakes)
    assert tools["pagerduty_acknowledge"].handler(incident="PD-1234")["incident_status"] == (
        "acknowledged"
    )
    note = tools["pagerduty_add_note"].handler(incident="PD-1234", content="timeline")
    assert note["status"] == "ok" and note["request_id"]
    assert tools["pagerduty_resolve"].handler(incident="PD-1234")["incident_status"] == "resolved"
    put = fakes.pagerduty.requests_to("PUT", "/incidents/PD-1234")[0]
    assert put.json() == {"incident": {"type": "incident_reference", "status": "acknowledged"}}
    assert put.headers["authorization"] == "Token token=u+charter-fake-token"
    assert put.headers["from"] == "oncall-bot@example.com"
    assert fakes.pagerduty.notes["PD-1234"][0]["content"] == "timeline"
    event = tools["pagerduty_trigger"].handler(summary="disk full", source="db-1")
    assert event["status"] == "ok" and event["dedup_key"]
    sent = fakes.pagerduty.events[0]
    assert sent["routing_key"] == "R0CHARTERFAKEROUTINGKEY00000000"
    assert sent["payload"] == {"summary": "disk full", "source": "db-1", "severity": "error"}


def test_pagerduty_errors_carry_pagerdutys_message(fakes: Fakes) -> None:
    got = pagerduty(fakes)["pagerduty_get_incident"].handler(incident="NOPE")
    assert got["error"] == "not_found" and got["details"] == ["Incident Not Found"]
    no_from = pagerduty(fakes, PAGERDUTY_FROM="nobody@example.com")
    got = no_from["pagerduty_acknowledge"].handler(incident="PD-1234")
    assert got["error"] == "remote_error" and got["http_status"] == 400
    assert fakes.pagerduty.incidents["PD-1234"]["status"] == "triggered"
