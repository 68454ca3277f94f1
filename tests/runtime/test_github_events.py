"""GitHub webhooks as GitHub sends them (trimmed real payloads, one per event): the event
header and ``action`` map to the trigger names personas declare and to seed-shaped work keys."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from charter.run.serve import webhook_kind
from charter.runtime import declares_trigger, normalize_trigger

GITHUB = Path(__file__).parent / "fixtures" / "github"
REPO = "github:octocat/Hello-World"
HEAD = "6dcb09b5b57875f334f61aebed695e2e4193db5e"

# fixture -> (X-GitHub-Event, kind, work key, a declared trigger name that must match);
# the keys are the table in docs/runtime.md, "Work keys of GitHub events"
CASES = {
    "pull_request.opened": (
        "pull_request",
        "pr_opened",
        f"{REPO}:pr:1347:{HEAD}",
        "github.pr_opened",
    ),
    "pull_request.synchronize": (
        "pull_request",
        "pr_synchronize",
        f"{REPO}:pr:1347:{HEAD}",
        "github.pr_synchronize",
    ),
    "pull_request.review_requested": (
        "pull_request",
        "review_requested",
        f"{REPO}:pr:1347:{HEAD}",
        "github.review_requested",
    ),
    "pull_request.closed": (
        "pull_request",
        "pr_merged",
        f"{REPO}:pr:1347:closed:{HEAD}",
        "github.pr_merged",
    ),
    "pull_request_review.submitted": (
        "pull_request_review",
        "review_submitted",
        f"{REPO}:pr:1347:review:80",
        "github.review_submitted",
    ),
    "issues.opened": ("issues", "issue_opened", f"{REPO}:issue:1:opened", "github.issue_opened"),
    "issue_comment.created": (
        "issue_comment",
        "issue_comment",
        f"{REPO}:issue:1:comment:492700400",
        "github.issue_comment",
    ),
    "check_run.completed": (
        "check_run",
        "check_failed",
        f"{REPO}:check:128620228:completed",
        "github.check_failed",
    ),
    "check_suite.completed": (
        "check_suite",
        "check_suite_completed",
        f"{REPO}:check:118578147:completed",
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


def _fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GITHUB / f"{name}.json").read_text())
    return data


def _key(event: str, payload: dict[str, Any]) -> str:
    return normalize_trigger(
        "github", webhook_kind("github", event, payload), payload=payload
    ).work_key


def test_every_push_is_work_of_its_own() -> None:
    """Issue 31: every push to a repository shared one key (and the ping too)."""
    first = _fixture("push")
    second = copy.deepcopy(first)
    second["before"], second["after"] = first["after"], "a" * 40
    other_ref = copy.deepcopy(first)
    other_ref["ref"] = "refs/heads/dev"
    ping = {"zen": "Keep it logically awesome.", "hook_id": 42, "repository": first["repository"]}
    keys = {_key("push", first), _key("push", second), _key("push", other_ref), _key("ping", ping)}
    assert len(keys) == 4
    assert _key("push", second) == f"{REPO}:push:refs/heads/main:{'a' * 40}"
    # pushes to one ref share a coalesce key (a newer one supersedes a queued older one)
    trig = [normalize_trigger("github", "push", payload=p) for p in (first, second, other_ref)]
    assert trig[0].coalesce_key == trig[1].coalesce_key != trig[2].coalesce_key


def test_a_new_head_is_new_work_and_reviews_and_comments_are_their_own() -> None:
    """Issue 31: one key per pull request for 24 h swallowed synchronize, reviews and
    comments; comments on a pull request were keyed as issues."""
    opened = _fixture("pull_request.opened")
    sync = copy.deepcopy(_fixture("pull_request.synchronize"))
    sync["pull_request"]["head"]["sha"] = "b" * 40
    review = _fixture("pull_request_review.submitted")
    review2 = copy.deepcopy(review)
    review2["review"]["id"] = 81
    comment = copy.deepcopy(_fixture("issue_comment.created"))
    comment["issue"]["pull_request"] = {"url": "https://api.github.com/repos/x/y/pulls/1"}
    keys = [
        _key("pull_request", opened),
        _key("pull_request", sync),
        _key("pull_request_review", review),
        _key("pull_request_review", review2),
        _key("issue_comment", comment),
    ]
    assert len(set(keys)) == 5
    assert keys[1] == f"{REPO}:pr:1347:{'b' * 40}"
    assert keys[4] == f"{REPO}:pr:1:comment:492700400"
    # opened and review_requested on the same head are one piece of work for a reviewer
    assert _key("pull_request", _fixture("pull_request.review_requested")) == keys[0]


def test_issue_actions_are_keyed_apart() -> None:
    opened = _fixture("issues.opened")
    closed = copy.deepcopy(opened)
    closed["action"] = "closed"
    assert _key("issues", opened) != _key("issues", closed)


def test_triggers_match_by_event_and_action() -> None:
    """Issue 31: ``github.review_requested`` ran on a pull request ``opened``."""
    opened = webhook_kind("github", "pull_request", _fixture("pull_request.opened"))
    assert opened == "pr_opened"
    assert not declares_trigger(["github.review_requested"], "github", opened)
    assert declares_trigger(["github.pr_opened"], "github", opened)
    assert declares_trigger(["github.pull_request"], "github", opened)  # the whole family
    assert declares_trigger(["github.*"], "github", opened)
    assert not declares_trigger(["github.pr_synchronize"], "github", opened)
