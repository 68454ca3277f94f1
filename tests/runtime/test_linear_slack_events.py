"""Linear and Slack webhooks as they send them (trimmed documented payloads, one per
event): trigger kinds, work keys, cohort metadata, and each sender's signature scheme."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest

from charter.run.serve import verify_webhook, webhook_kind
from charter.runtime import declares_trigger, normalize_trigger

FIXTURES = Path(__file__).parent / "fixtures"

# fixture -> (kind, work key, a declared trigger name that must match, metadata subset)
CASES = {
    "linear/Issue.create": (
        "issue_created",
        "linear:issue:ENG-142",
        "linear.issue_created",
        {"team": "ENG", "label": "bug", "assignee": "Alice"},
    ),
    "linear/Issue.update": (  # an update by its time: each is work of its own
        "issue_updated",
        "linear:issue:ENG-142:update:2026-11-20T10:14:03.422Z",
        "linear.issue_updated",
        {},
    ),
    "linear/Comment.create": (
        "comment_created",
        # a comment by its own id, under its issue
        "linear:issue:ENG-142:comment:9d1c0b3e-2f7a-4c0e-8b1a-6f5e4d3c2b1a",
        "linear.comment_created",  # by event and action: issue_created does not hear it
        {"team": "ENG", "author": "Alice"},
    ),
    "slack/app_mention": (
        "app_mention",
        "slack:C0123OPS:1795603330.000200",
        "slack.message",
        {"channel": "C0123OPS", "user": "U2147483697"},
    ),
    "slack/message": (
        "message",
        "slack:C0123OPS:1795603330.000200",  # a reply belongs to its thread
        "slack.message",
        {"channel": "C0123OPS"},
    ),
}


def _load(name: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((FIXTURES / f"{name}.json").read_text())
    return data


@pytest.mark.parametrize("name", sorted(CASES))
def test_event_maps_to_trigger_work_key_and_metadata(name: str) -> None:
    kind, key, declared, meta = CASES[name]
    provider = name.split("/")[0]
    payload = _load(name)
    assert webhook_kind(provider, None, payload) == kind
    normalized = normalize_trigger(provider, kind, None, payload=payload)
    assert normalized.work_key == key
    assert meta.items() <= normalized.metadata.items()
    assert declares_trigger([declared], provider, kind)
    # and the same body without a kind: inferred from the payload itself
    assert normalize_trigger(provider, None, None, payload=payload).work_key == key


def test_slack_url_verification_is_not_a_trigger() -> None:
    assert webhook_kind("slack", None, _load("slack/url_verification")) is None


def test_each_sender_signature_scheme() -> None:
    body = (FIXTURES / "linear" / "Issue.create.json").read_bytes()
    secret = "lin_wh_secret"
    good = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    assert verify_webhook("linear", secret, body, {"linear-signature": good}, 0)
    assert not verify_webhook("linear", secret, body + b" ", {"linear-signature": good}, 0)
    assert not verify_webhook("linear", secret, body, {"x-hub-signature-256": "sha256=" + good}, 0)

    body = (FIXTURES / "slack" / "app_mention.json").read_bytes()
    now = 1795603335.0
    stamp = "1795603330"
    base = b"v0:" + stamp.encode() + b":" + body
    sig = "v0=" + hmac.new(b"slack_secret", base, hashlib.sha256).hexdigest()
    headers = {"x-slack-request-timestamp": stamp, "x-slack-signature": sig}
    assert verify_webhook("slack", "slack_secret", body, headers, now)
    assert not verify_webhook("slack", "slack_secret", body, headers, now + 600)  # replayed
    assert not verify_webhook("slack", "other", body, headers, now)
    assert verify_webhook("slack", None, body, {}, now)  # no secret configured
