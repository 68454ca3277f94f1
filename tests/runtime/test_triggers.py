"""Trigger normalisation (pure, backend-independent)."""

from __future__ import annotations

import pytest

from charter.runtime import TriggerError, declares_trigger, normalize_trigger


@pytest.mark.parametrize(
    ("provider", "kind", "metadata", "key"),
    [
        ("github", "pull_request", {"repository": "burin-labs/harn", "number": "462"},
         "github:burin-labs/harn:pr:462"),
        ("github", "pr_opened", {"repository": "a/b", "number": "1"}, "github:a/b:pr:1"),
        ("github", "check_run", {"repository": "a/b", "check_run_id": "9"}, "github:a/b:check:9"),
        ("github", "check_failed", {"repository": "a/b", "head_sha": "f0"}, "github:a/b:check:f0"),
        ("linear", "issue", {"identifier": "ENG-12"}, "linear:issue:ENG-12"),
        ("slack", "message", {"channel": "C1", "ts": "1.2", "thread_ts": "1.0"}, "slack:C1:1.0"),
        ("pagerduty", "incident", {"id": "P9"}, "webhook:pagerduty:incident:P9"),
    ],
)  # fmt: skip
def test_metadata_normalisation(
    provider: str, kind: str, metadata: dict[str, str], key: str
) -> None:
    assert normalize_trigger(provider, kind, metadata).work_key == key


def test_generic_webhook_without_id_is_a_stable_digest() -> None:
    a = normalize_trigger("hook", "ping", {"x": "1", "y": "2"}).work_key
    b = normalize_trigger("hook", "ping", {"y": "2", "x": "1"}).work_key
    assert a == b and a.startswith("webhook:hook:ping:sha256:")


def test_whole_payloads() -> None:
    gh = {"action": "opened", "number": 462, "pull_request": {"number": 462},
          "repository": {"full_name": "burin-labs/harn"}}  # fmt: skip
    t = normalize_trigger("github", None, payload=gh)
    # the action refines the kind (issue 31: triggers match by event and action)
    assert (t.kind, t.work_key) == ("pr_opened", "github:burin-labs/harn:pr:462")
    lin = {"type": "Issue", "action": "create", "data": {"identifier": "ENG-7", "id": "uuid"}}
    assert normalize_trigger("linear", None, payload=lin).work_key == "linear:issue:ENG-7"
    slack = {"team_id": "T1", "event": {"type": "message", "channel": "C9", "ts": "17.5"}}
    assert normalize_trigger("slack", None, payload=slack).work_key == "slack:C9:17.5"
    generic = {"id": "evt_1", "type": "invoice.paid"}
    assert normalize_trigger("stripe", None, payload=generic).work_key == (
        "webhook:stripe:invoice.paid:evt_1"
    )
    # explicit metadata wins over the payload
    over = normalize_trigger("github", None, {"number": "5"}, payload=gh)
    assert over.work_key == "github:burin-labs/harn:pr:5"


def test_errors_are_clear() -> None:
    with pytest.raises(TriggerError, match="needs metadata repository, number"):
        normalize_trigger("github", "pull_request", {})
    with pytest.raises(TriggerError, match="needs a kind"):
        normalize_trigger("github", None, {})
    with pytest.raises(TriggerError, match="needs a provider"):
        normalize_trigger("", "x", {})


def test_a_body_without_its_event_header_is_kinded_by_shape_and_action() -> None:
    review = {"action": "submitted", "review": {"id": 7}, "pull_request": {"number": 3},
              "repository": {"full_name": "a/b"}}  # fmt: skip
    assert normalize_trigger("github", None, payload=review).kind == "review_submitted"
    comment = {"action": "created", "issue": {"number": 4}, "comment": {"id": 9},
               "repository": {"full_name": "a/b"}}  # fmt: skip
    t = normalize_trigger("github", None, payload=comment)
    assert (t.kind, t.work_key) == ("issue_comment", "github:a/b:issue:4:comment:9")
    requested = {"action": "review_requested", "pull_request": {"number": 5},
                 "repository": {"full_name": "a/b"}}  # fmt: skip
    assert normalize_trigger("github", None, payload=requested).kind == "review_requested"


def test_declared_trigger_matching() -> None:
    declared = ["github.pr_opened", "github.check_failed", "slack.*"]
    assert declares_trigger(declared, "github", "pull_request")
    assert declares_trigger(declared, "github", "pr_opened")
    assert declares_trigger(declared, "github", "check_run")
    assert declares_trigger(declared, "slack", "app_mention")
    assert not declares_trigger(declared, "github", "push")
    assert not declares_trigger(declared, "linear", "issue")
    # by event AND action: a named action is not its family's other actions (issue 31)
    assert not declares_trigger(["github.review_requested"], "github", "pr_opened")
    assert not declares_trigger(["github.pr_opened"], "github", "pr_synchronize")
    assert not declares_trigger(["linear.issue_created"], "linear", "comment_created")
    # a declaration of the family itself covers its actions
    assert declares_trigger(["github.pull_request"], "github", "review_requested")


def test_the_subject_outcomes_settle() -> None:
    """A review's outcome settles the proposal made on the pull request's head: the
    keys differ (issue 31), their subject does not."""
    from charter.runtime import subject_of

    head = "github:a/b:pr:5:" + "f" * 40
    assert subject_of(head) == subject_of("github:a/b:pr:5:review:80") == "github:a/b:pr:5"
    assert subject_of("github:a/b:issue:4:comment:9") == "github:a/b:issue:4"
    assert subject_of("linear:issue:ENG-1:comment:x") == "linear:issue:ENG-1"
    assert subject_of("github:a/b:pr:50") != subject_of("github:a/b:pr:5")
    assert subject_of("slack:C1:1.0") == "slack:C1:1.0"
