"""Which persona triggers charter's webhook receiver can deliver, and why not the others.

``charter serve`` takes webhooks on ``POST /hooks/<provider>`` and turns each into a trigger
kind (:func:`charter.run.serve.webhook_kind`: GitHub's event and action, Linear's type and
action, Slack's event type); a persona is woken when one of its ``triggers`` names that
kind exactly, or names a whole family (``github.pull_request``), or ``provider.*``
(:func:`charter.runtime.triggers.declares_trigger`). A trigger name no webhook ever turns
into is valid (``charter persona trigger`` can still fire it), but it is one charter
cannot *receive*: :func:`unreceived` says so, and ``persona check`` warns. The tables below
describe the receiver without importing it (``check`` stays light);
``tests/manifest/test_harn.py`` drives the real receiver with each provider's own
payloads, so the two cannot drift.
"""

from __future__ import annotations

import functools

from .syntax import TriggerName

#: Declarations that name a whole family and match every kind in it (mirrors
#: ``charter.runtime.triggers._FAMILIES``: a family's name or one of its prefixes).
BARE_FAMILIES: dict[str, frozenset[str]] = {
    "github": frozenset(
        ("pull_request", "pr", "check_run", "check_suite", "check", "review", "issue", "push")
    ),
    "linear": frozenset(("issue", "comment")),
    "slack": frozenset(("message", "app_mention")),
}

#: GitHub's webhook actions of the events the receiver refines by action
#: (``charter.runtime.triggers.github_kind``).
GITHUB_ACTIONS: dict[str, tuple[str, ...]] = {
    "pull_request": (
        "assigned", "auto_merge_disabled", "auto_merge_enabled", "closed", "converted_to_draft",
        "demilestoned", "dequeued", "edited", "enqueued", "labeled", "locked", "milestoned",
        "opened", "ready_for_review", "reopened", "review_request_removed", "synchronize",
        "unassigned", "unlabeled", "unlocked",
    ),
    "pull_request_review": ("submitted", "edited", "dismissed"),
    "check_run": ("created", "completed", "rerequested", "requested_action"),
    "check_suite": ("completed", "requested", "rerequested"),
    "issues": (
        "opened", "edited", "deleted", "pinned", "unpinned", "closed", "reopened", "assigned",
        "unassigned", "labeled", "unlabeled", "locked", "unlocked", "transferred",
        "milestoned", "demilestoned", "typed", "untyped",
    ),
}  # fmt: skip

#: ``X-GitHub-Event`` names: an event outside the families above is delivered under its
#: own name (``merge_group``, ``release``, ``workflow_run``).
GITHUB_EVENTS: frozenset[str] = frozenset(
    (
        "branch_protection_configuration",
        "branch_protection_rule",
        "check_run",
        "check_suite",
        "code_scanning_alert",
        "commit_comment",
        "create",
        "custom_property",
        "custom_property_values",
        "delete",
        "dependabot_alert",
        "deploy_key",
        "deployment",
        "deployment_protection_rule",
        "deployment_review",
        "deployment_status",
        "discussion",
        "discussion_comment",
        "fork",
        "github_app_authorization",
        "gollum",
        "installation",
        "installation_repositories",
        "installation_target",
        "issue_comment",
        "issues",
        "label",
        "marketplace_purchase",
        "member",
        "membership",
        "merge_group",
        "meta",
        "milestone",
        "org_block",
        "organization",
        "package",
        "page_build",
        "personal_access_token_request",
        "ping",
        "project",
        "project_card",
        "project_column",
        "projects_v2",
        "projects_v2_item",
        "projects_v2_status_update",
        "public",
        "pull_request",
        "pull_request_review",
        "pull_request_review_comment",
        "pull_request_review_thread",
        "push",
        "registry_package",
        "release",
        "repository",
        "repository_advisory",
        "repository_dispatch",
        "repository_import",
        "repository_ruleset",
        "repository_vulnerability_alert",
        "secret_scanning_alert",
        "secret_scanning_alert_location",
        "secret_scanning_scan",
        "security_advisory",
        "security_and_analysis",
        "sponsorship",
        "star",
        "status",
        "sub_issues",
        "team",
        "team_add",
        "watch",
        "workflow_dispatch",
        "workflow_job",
        "workflow_run",
    )
)


#: Every kind a GitHub webhook becomes: ``pr_<action>`` (``review_requested`` as is, a
#: merged close ``pr_merged``), ``review_<action>``, ``check_failed`` / ``check_<action>`` /
#: ``check_suite_<action>``, ``issue_<action>``, and any other event under its own name.
GITHUB_KINDS: frozenset[str] = frozenset(
    {f"pr_{a}" for a in GITHUB_ACTIONS["pull_request"]}
    | {"review_requested", "pr_merged", "pull_request", "review", "issue", "check_failed"}
    | {f"review_{a}" for a in GITHUB_ACTIONS["pull_request_review"]}
    | {f"check_{a}" for a in GITHUB_ACTIONS["check_run"]}
    | {f"check_suite_{a}" for a in GITHUB_ACTIONS["check_suite"]}
    | {f"issue_{a}" for a in GITHUB_ACTIONS["issues"]}
    | (GITHUB_EVENTS - {"pull_request", "pull_request_review", "issues"})
)

#: Linear webhook ``type``s (lower-cased) other than issues and comments, delivered as is.
LINEAR_TYPES: frozenset[str] = frozenset(
    (
        "attachment", "audit_entry", "customer", "customerneed", "cycle", "document",
        "initiative", "initiativeupdate", "issuelabel", "issuesla", "oauthapp", "project",
        "projectupdate", "reaction", "user",
    )
)  # fmt: skip

#: Every kind a Linear webhook becomes (``charter.runtime.triggers.linear_kind``).
LINEAR_KINDS: frozenset[str] = frozenset(
    {f"{t}_{v}" for t in ("issue", "comment") for v in ("created", "updated", "removed")}
    | LINEAR_TYPES
)

#: Slack Events API ``event.type`` values, delivered under their own name.
SLACK_EVENTS: frozenset[str] = frozenset(
    (
        "app_home_opened",
        "app_mention",
        "app_rate_limited",
        "app_requested",
        "app_uninstalled",
        "assistant_thread_context_changed",
        "assistant_thread_started",
        "call_rejected",
        "channel_archive",
        "channel_created",
        "channel_deleted",
        "channel_history_changed",
        "channel_id_changed",
        "channel_left",
        "channel_rename",
        "channel_shared",
        "channel_unarchive",
        "channel_unshared",
        "dnd_updated",
        "dnd_updated_user",
        "email_domain_changed",
        "emoji_changed",
        "file_change",
        "file_comment_deleted",
        "file_created",
        "file_deleted",
        "file_public",
        "file_shared",
        "file_unshared",
        "function_executed",
        "group_archive",
        "group_close",
        "group_deleted",
        "group_history_changed",
        "group_left",
        "group_open",
        "group_rename",
        "group_unarchive",
        "im_close",
        "im_created",
        "im_history_changed",
        "im_open",
        "invite_requested",
        "link_shared",
        "member_joined_channel",
        "member_left_channel",
        "message",
        "pin_added",
        "pin_removed",
        "reaction_added",
        "reaction_removed",
        "shared_channel_invite_accepted",
        "shared_channel_invite_approved",
        "shared_channel_invite_declined",
        "shared_channel_invite_received",
        "star_added",
        "star_removed",
        "subteam_created",
        "subteam_members_changed",
        "subteam_self_added",
        "subteam_self_removed",
        "subteam_updated",
        "team_access_granted",
        "team_access_revoked",
        "team_domain_change",
        "team_join",
        "team_rename",
        "tokens_revoked",
        "user_change",
        "user_huddle_changed",
        "user_profile_changed",
        "user_status_changed",
        "workflow_deleted",
        "workflow_published",
        "workflow_step_deleted",
        "workflow_step_execute",
        "workflow_unpublished",
    )
)

#: What each provider's own webhooks carry, for the message about a provider charter
#: has no receiver for.
_NO_RECEIVER_NOTE: dict[str, str] = {
    "pagerduty": "PagerDuty's own webhooks, with event.event_type and X-PagerDuty-Signature, "
    "are not read",
}


def _closest(kind: str, kinds: frozenset[str]) -> str | None:
    import difflib  # only for a trigger the receiver never delivers

    close = difflib.get_close_matches(kind, sorted(kinds), n=1, cutoff=0.8)
    return close[0] if close else None


def _delivered(provider: str, kind: str, kinds: frozenset[str]) -> bool:
    return kind in kinds or kind in BARE_FAMILIES.get(provider, ())


@functools.lru_cache(maxsize=1024)  # a fleet repeats its trigger names
def unreceived(trigger: TriggerName) -> str | None:
    """Why charter's webhook receiver never delivers ``trigger``; ``None`` when it does."""
    provider, kind = trigger.provider, trigger.event
    manual = f"`charter persona trigger --provider {provider} --kind {kind}`"
    if provider == "github":
        if _delivered(provider, kind, GITHUB_KINDS):
            return None
        event = next((e for e in sorted(GITHUB_EVENTS, key=len, reverse=True)
                      if kind.startswith(e + "_")), None)  # fmt: skip
        # harn writes pull_request_<action>; the receiver's pull request kinds are pr_<action>
        spelled = "pr_" + kind.removeprefix("pull_request_")
        close = _closest(spelled if kind.startswith("pull_request_") else kind, GITHUB_KINDS)
        if close is not None:
            hint = f"; the nearest it delivers is github.{close}"
        elif event is not None:
            hint = f"; GitHub sends it as the {event} event, delivered as github.{event}"
        else:
            hint = ""
        return (
            f"trigger {trigger} is no kind POST /hooks/github delivers (GitHub's event and "
            f"action){hint}; it arrives only through {manual}"
        )
    if provider == "slack":
        if _delivered(provider, kind, SLACK_EVENTS):
            return None
        return (
            f"trigger {trigger} is not a Slack Events API type (POST /hooks/slack delivers "
            f"message, app_mention, reaction_added, ...; a message in a channel is "
            f"slack.message, narrowed with a rollout cohort channel:C...); it arrives only "
            f"through {manual}"
        )
    if provider == "linear":
        if _delivered(provider, kind, LINEAR_KINDS):
            return None
        return (
            f"trigger {trigger} is no kind POST /hooks/linear delivers (issue_created, "
            f"issue_updated, issue_removed, comment_created, ...); it arrives only through "
            f"{manual}"
        )
    note = _NO_RECEIVER_NOTE.get(provider)
    return (
        f"charter has no {provider} receiver"
        + (f"; {note}" if note else "")
        + f": trigger {trigger} arrives only as a generic signed webhook on "
        f'POST /hooks/{provider} whose JSON body has "type": "{kind}", or through {manual}'
    )


__all__ = [
    "BARE_FAMILIES",
    "GITHUB_ACTIONS",
    "GITHUB_EVENTS",
    "GITHUB_KINDS",
    "LINEAR_KINDS",
    "SLACK_EVENTS",
    "unreceived",
]
