"""``charter doctor``'s checks of the integrations: what is set, and whether it works.

Each check is ``{"check", "status": ok|warn|fail, "detail"}``. A check that needs the
network asks the service itself (GitHub ``GET /user`` or ``GET /app`` and the
repository's installation, Slack ``auth.test``, PagerDuty ``GET /abilities``); nothing is
written anywhere. Secrets are never printed.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Any

from ._retry import RetryPolicy
from .errors import IntegrationError
from .settings import IntegrationSettings

_ONCE = RetryPolicy(attempts=1, timeout=15.0)
WEBHOOK_SECRET = "CHARTER_WEBHOOK_SECRET_GITHUB"


def _item(check: str, status: str, detail: str) -> dict[str, Any]:
    return {"check": check, "status": status, "detail": detail}


def checks(
    env: Mapping[str, str] | None = None,
    *,
    repository: str | None = None,
    settings: IntegrationSettings | None = None,
) -> list[dict[str, Any]]:
    """The integration checks; ``repository`` (``owner/name``) adds the App's installation."""
    env = os.environ if env is None else env
    out: list[dict[str, Any]] = []
    try:
        settings = settings or IntegrationSettings.load(env)
    except IntegrationError as exc:
        return [_item(f"{exc.service}:credentials", "fail", exc.message)]
    out.extend(_github(settings, repository))
    if env.get(WEBHOOK_SECRET):
        out.append(_item("github:webhook_secret", "ok", f"{WEBHOOK_SECRET} is set"))
    else:
        out.append(
            _item(
                "github:webhook_secret",
                "warn",
                f"{WEBHOOK_SECRET} is not set: charter serve accepts unsigned GitHub "
                "webhooks (set it to the GitHub App's webhook secret)",
            )
        )
    out.append(_slack(settings))
    out.extend(_pagerduty(settings))
    return out


def _github(settings: IntegrationSettings, repository: str | None) -> list[dict[str, Any]]:
    from .github import GitHubClient

    gs = settings.github
    where = f"({gs.api_url})"
    if gs.auth_mode == "none":
        return [
            _item(
                "github:credentials",
                "warn",
                "no GITHUB_TOKEN and no GitHub App (GITHUB_APP_ID + "
                "GITHUB_APP_PRIVATE_KEY[_PATH]): the GitHub tools will refuse",
            )
        ]
    client = GitHubClient(gs, repository or "charter/doctor", retry=_ONCE)
    out: list[dict[str, Any]] = []
    try:
        if gs.auth_mode == "token":
            login, scopes = asyncio.run(client.whoami())
            if scopes is None:
                detail = f"token valid {where}: {login} (fine-grained or App token: no scopes list)"
                out.append(_item("github:token", "ok", detail))
            else:
                have = {s.strip() for s in scopes.split(",") if s.strip()}
                status = "ok" if have & {"repo", "public_repo"} else "warn"
                detail = (
                    f"token valid {where}: {login}; scopes: {', '.join(sorted(have)) or 'none'}"
                )
                if status == "warn":
                    detail += " (reviews and merges need 'repo' or 'public_repo')"
                out.append(_item("github:token", status, detail))
        else:
            slug = asyncio.run(client.app_slug())
            out.append(_item("github:app", "ok", f"App {gs.app_id} ({slug}) authenticated {where}"))
            if repository:
                iid = asyncio.run(client.installation())
                out.append(
                    _item(
                        "github:installation",
                        "ok",
                        f"installed on {repository} (installation {iid})",
                    )
                )
            else:
                out.append(
                    _item(
                        "github:installation",
                        "warn",
                        "pass --repo OWNER/NAME to check the App is installed there",
                    )
                )
    except IntegrationError as exc:
        out.append(_item(f"github:{gs.auth_mode}", "fail", f"{exc.message} {where}"))
    except ValueError as exc:
        out.append(_item("github:repository", "fail", str(exc)))
    return out


def _slack(settings: IntegrationSettings) -> dict[str, Any]:
    from .slack import SlackClient

    if not settings.slack.bot_token:
        return _item("slack:token", "warn", "SLACK_BOT_TOKEN is not set: Slack posts will refuse")
    try:
        who = SlackClient(settings.slack, retry=_ONCE).auth_test()
    except IntegrationError as exc:
        return _item("slack:token", "fail", f"{exc.message} ({settings.slack.api_url})")
    return _item("slack:token", "ok", f"bot token valid: {who}")


def _pagerduty(settings: IntegrationSettings) -> list[dict[str, Any]]:
    from .pagerduty import PagerDutyClient

    pd = settings.pagerduty
    out: list[dict[str, Any]] = []
    if not pd.token:
        out.append(_item("pagerduty:token", "warn", "PAGERDUTY_TOKEN is not set"))
    else:
        try:
            PagerDutyClient(pd).abilities()
            out.append(_item("pagerduty:token", "ok", f"REST API token valid ({pd.api_url})"))
        except IntegrationError as exc:
            out.append(_item("pagerduty:token", "fail", f"{exc.message} ({pd.api_url})"))
        if not pd.from_email:
            out.append(
                _item(
                    "pagerduty:from",
                    "warn",
                    "PAGERDUTY_FROM is not set: acknowledging and notes need the "
                    "email of a PagerDuty user",
                )
            )
    status = "ok" if pd.routing_key else "warn"
    detail = "set" if pd.routing_key else "not set: pagerduty_trigger will refuse"
    out.append(_item("pagerduty:routing_key", status, f"PAGERDUTY_ROUTING_KEY {detail}"))
    return out
