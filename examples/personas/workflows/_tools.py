"""The pack's integrations: charter.tools' GitHub, Slack and PagerDuty tools.

Each operation is its own tool (``github_get_diff`` reads, ``github_merge`` writes...),
so the personas' policies in charter.toml name exactly what each role may do. The tools
are configured as production is: ``GITHUB_TOKEN`` or a GitHub App (``GITHUB_APP_ID`` +
``GITHUB_APP_PRIVATE_KEY[_PATH]``), ``GITHUB_API_URL``, ``SLACK_BOT_TOKEN``,
``PAGERDUTY_TOKEN``... and charter.toml's ``[integrations]`` tables (see
docs/guide-github.md). ``charter demo`` points them at the offline fakes of
:mod:`charter.testing`.
"""

from __future__ import annotations

from typing import Any

from charter.tools import GitHubClient, IntegrationSettings, github_tools
from charter.tools.pagerduty import PagerDutyClient, pagerduty_tools
from charter.tools.slack import SlackClient, slack_tools


def repository(ctx: Any) -> str:
    """The repository the run acts on: the trigger's, or the handoff payload's."""
    meta = ctx.trigger.metadata
    payload = (ctx.handoff_item or {}).get("payload") or {}
    repo = meta.get("repository") or payload.get("repository")
    if not repo:
        raise ValueError("the trigger names no repository (metadata repository=owner/name)")
    return str(repo)


def register_github(ctx: Any, repo: str | None = None) -> GitHubClient:
    """Register every GitHub tool for ``repo`` (default: the trigger's repository).

    With a GitHub App, the webhook's ``installation.id`` is used when the payload has it
    (otherwise the installation is looked up for the repository)."""
    settings = IntegrationSettings.for_pack(ctx.pack_dir)
    payload = ctx.trigger.payload or {}
    installation = (payload.get("installation") or {}).get("id")
    client = GitHubClient(
        settings.github,
        repo or repository(ctx),
        installation_id=int(installation) if installation else None,
    )
    ctx.register_tools(github_tools(client, merge_method=settings.github.merge_method))
    return client


def register_oncall(ctx: Any) -> None:
    """Register the PagerDuty and Slack tools."""
    settings = IntegrationSettings.for_pack(ctx.pack_dir)
    ctx.register_tools(pagerduty_tools(PagerDutyClient(settings.pagerduty)))
    ctx.register_tools(slack_tools(SlackClient(settings.slack)))
