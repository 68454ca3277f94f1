"""GitHub webhooks as GitHub sends them (trimmed real payloads, one per event): the event
header and ``action`` map to the trigger names personas declare and to seed-shaped work keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from charter.run.serve import webhook_kind
from charter.runtime import declares_trigger, normalize_trigger

GITHUB = Path(__file__).parent / "fixtures" / "github"
REPO = "github:octocat/Hello-World"

# fixture -> (X-GitHub-Event, kind, work key, a declared trigger name that must match)
CASES = {
    "pull_request.opened": ("pull_request", "pr_opened", f"{REPO}:pr:1347", "github.pr_opened"),
    "pull_request.synchronize": (
        "pull_request",
        "pr_synchronize",
        f"{REPO}:pr:1347",
        "github.pr_synchronize",
    ),
    "pull_request.review_requested": (
        "pull_request",
        "review_requested",
        f"{REPO}:pr:1347",
        "github.review_requested",
    ),
    "pull_request.closed": ("pull_request", "pr_merged", f"{REPO}:pr:1347", "github.pr_merged"),
    "pull_request_review.submitted": (
        "pull_request_review",
        "review_submitted",
        f"{REPO}:pr:1347",
        "github.review_submitted",
    ),
    "issues.opened": ("issues", "issue_opened", f"{REPO}:issue:1", "github.issue_opened"),
    "issue_comment.created": (
        "issue_comment",
        "issue_comment",
        f"{REPO}:issue:1",
        "github.issue_comment",
    ),
    "check_run.completed": (
        "check_run",
        "check_failed",
        f"{REPO}:check:128620228",
        "github.check_failed",
    ),
    "check_suite.completed": (
        "check_suite",
        "check_suite_completed",
        f"{REPO}:check:118578147",
        "github.check_suite_completed",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_github_event_maps_to_trigger_and_work_key(name: str) -> None:
    event, kind, key, declared = CASES[name]
    payload = json.loads((GITHUB / f"{name}.json").read_text())
    got = webhook_kind("github", event, payload)
    assert got == kind
    trigger = normalize_trigger("github", got, payload=payload)
    assert trigger.work_key == key
    assert declares_trigger([declared], "github", got)


def test_review_requested_matches_a_persona_declaring_it() -> None:
    payload = json.loads((GITHUB / "pull_request.review_requested.json").read_text())
    kind = webhook_kind("github", "pull_request", payload)
    assert kind is not None
    assert declares_trigger(["github.review_requested"], "github", kind)
    # and a persona declaring only issues is not woken by it
    assert not declares_trigger(["github.issue_opened"], "github", kind)


def test_push_gets_a_stable_key_and_no_other_family() -> None:
    payload = json.loads((GITHUB / "push.json").read_text())
    kind = webhook_kind("github", "push", payload)
    assert kind == "push"
    first = normalize_trigger("github", kind, payload=payload).work_key
    assert first == normalize_trigger("github", kind, payload=payload).work_key
    assert not declares_trigger(["github.pr_opened"], "github", kind)
