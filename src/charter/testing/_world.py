"""All three fakes at once, filled from a world file: for demos, guides and a team's tests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .github import FakeGitHub
from .pagerduty import FakePagerDuty
from .slack import FakeSlack

GITHUB_TOKEN = "ghp_charter_fake_token"
SLACK_TOKEN = "xoxb-charter-fake-token"
PAGERDUTY_TOKEN = "u+charter-fake-token"
ROUTING_KEY = "R0CHARTERFAKEROUTINGKEY00000000"
PAGERDUTY_FROM = "oncall-bot@example.com"


@dataclass
class Fakes:
    github: FakeGitHub
    slack: FakeSlack
    pagerduty: FakePagerDuty

    def env(self) -> dict[str, str]:
        """The environment that points charter.tools at these fakes (fake credentials)."""
        assert self.pagerduty.ca_file is not None
        return {
            "GITHUB_API_URL": self.github.url,
            "GITHUB_TOKEN": GITHUB_TOKEN,
            "SLACK_API_URL": self.slack.api_url,
            "SLACK_BOT_TOKEN": SLACK_TOKEN,
            "PAGERDUTY_API_URL": self.pagerduty.url,
            "PAGERDUTY_EVENTS_URL": self.pagerduty.url,
            "PAGERDUTY_TOKEN": PAGERDUTY_TOKEN,
            "PAGERDUTY_ROUTING_KEY": ROUTING_KEY,
            "PAGERDUTY_FROM": PAGERDUTY_FROM,
            "CHARTER_CA_BUNDLE": self.pagerduty.ca_file,
        }


@contextmanager
def serve_fakes(world: str | Path | None = None) -> Iterator[Fakes]:
    """Start :class:`FakeGitHub`, :class:`FakeSlack` and :class:`FakePagerDuty`, filled from
    ``world`` (a JSON file with ``github`` — see :meth:`FakeGitHub.load` —, ``slack``
    ``{"channels": {"#name": "C…"}}`` and ``pagerduty`` ``{"incidents": [{id, title,
    service}]}``); stopped on exit."""
    data = json.loads(Path(world).read_text(encoding="utf-8")) if world else {}
    channels = dict((data.get("slack") or {}).get("channels") or {"#incidents": "C0INCIDENTS"})
    github = FakeGitHub(tokens=[GITHUB_TOKEN])
    slack = FakeSlack(tokens=[SLACK_TOKEN], channels=list(channels.values()), names=channels)
    pagerduty = FakePagerDuty(
        tokens=[PAGERDUTY_TOKEN], routing_keys=[ROUTING_KEY], users=[PAGERDUTY_FROM]
    )
    if world:
        github.load_world(data.get("github") or {}, Path(world).parent)
    for incident in (data.get("pagerduty") or {}).get("incidents") or []:
        pagerduty.add_incident(
            incident["id"], incident["title"], service=incident.get("service", "checkout")
        )
    github.start()
    try:
        slack.start()
        try:
            pagerduty.start()
            try:
                yield Fakes(github, slack, pagerduty)
            finally:
                pagerduty.stop()
        finally:
            slack.stop()
    finally:
        github.stop()
