"""Where the integrations find their endpoints and credentials.

Environment variables always work (they are what GitHub Actions, containers and secret
managers set); ``charter.toml`` may add the non-secret settings under
``[integrations.github]`` / ``[integrations.slack]`` / ``[integrations.pagerduty]``
(``api_url``, ``app_id``, ``private_key_path``, ``events_url``, ``from_email``). An
environment variable wins over the file. Tokens and keys are read from the environment
(or the key file) only: a checked-in file holds no secret.

- GitHub: ``GITHUB_TOKEN``, or a GitHub App: ``GITHUB_APP_ID`` with
  ``GITHUB_APP_PRIVATE_KEY`` (the PEM) or ``GITHUB_APP_PRIVATE_KEY_PATH``; base URL
  ``GITHUB_API_URL`` (GitHub Enterprise Server: ``https://HOST/api/v3``);
- Slack: ``SLACK_BOT_TOKEN``; base URL ``SLACK_API_URL``;
- PagerDuty: ``PAGERDUTY_TOKEN`` (REST API), ``PAGERDUTY_ROUTING_KEY`` (Events API v2),
  ``PAGERDUTY_FROM`` (the user email REST writes need); base URLs ``PAGERDUTY_API_URL``,
  ``PAGERDUTY_EVENTS_URL``.

``CHARTER_CA_BUNDLE`` names extra CA certificates to trust (a GitHub Enterprise Server
with a private CA, or the TLS fakes of :mod:`charter.testing`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from charter.sandbox.execute import CREDENTIAL_VARS as _SANDBOX_CREDENTIAL_VARS

from .errors import CredentialsMissing

GITHUB_API_URL = "https://api.github.com"
SLACK_API_URL = "https://slack.com/api/"
PAGERDUTY_API_URL = "https://api.pagerduty.com"
PAGERDUTY_EVENTS_URL = "https://events.pagerduty.com"

#: Every environment variable that carries a credential: redacted from results and
#: receipts, and never passed to a shell the agent runs (:mod:`charter.sandbox`).
CREDENTIAL_VARS = tuple(sorted(_SANDBOX_CREDENTIAL_VARS))


@dataclass(frozen=True, repr=False)
class GitHubSettings:
    """How to reach GitHub. ``repr`` never shows the token or the key."""

    api_url: str = GITHUB_API_URL
    token: str | None = None
    app_id: str | None = None
    private_key: str | None = None
    ca_bundle: str | None = None
    #: how ``github_merge`` merges: merge, squash or rebase (``[integrations.github]``)
    merge_method: str = "squash"

    @property
    def auth_mode(self) -> str:
        """``app`` (an App's installation tokens), ``token`` or ``none``."""
        if self.app_id and self.private_key:
            return "app"
        return "token" if self.token else "none"

    def require(self) -> None:
        if self.auth_mode == "none":
            raise CredentialsMissing(
                "github",
                "no credentials: set GITHUB_TOKEN, or GITHUB_APP_ID with "
                "GITHUB_APP_PRIVATE_KEY (or GITHUB_APP_PRIVATE_KEY_PATH)",
            )

    def secrets(self) -> tuple[str, ...]:
        return tuple(s for s in (self.token, self.private_key) if s)

    def __repr__(self) -> str:
        return f"GitHubSettings(api_url={self.api_url!r}, auth_mode={self.auth_mode!r})"


@dataclass(frozen=True, repr=False)
class SlackSettings:
    api_url: str = SLACK_API_URL
    bot_token: str | None = None

    def require(self) -> None:
        if not self.bot_token:
            raise CredentialsMissing("slack", "no credentials: set SLACK_BOT_TOKEN")

    def secrets(self) -> tuple[str, ...]:
        return (self.bot_token,) if self.bot_token else ()

    def __repr__(self) -> str:
        return f"SlackSettings(api_url={self.api_url!r}, token={bool(self.bot_token)})"


@dataclass(frozen=True, repr=False)
class PagerDutySettings:
    api_url: str = PAGERDUTY_API_URL
    events_url: str = PAGERDUTY_EVENTS_URL
    token: str | None = None
    routing_key: str | None = None
    from_email: str | None = None
    ca_bundle: str | None = None

    def require_rest(self) -> None:
        if not self.token:
            raise CredentialsMissing("pagerduty", "no REST API credentials: set PAGERDUTY_TOKEN")

    def require_events(self) -> None:
        if not self.routing_key:
            raise CredentialsMissing(
                "pagerduty", "no Events API v2 routing key: set PAGERDUTY_ROUTING_KEY"
            )

    def secrets(self) -> tuple[str, ...]:
        return tuple(s for s in (self.token, self.routing_key) if s)

    def __repr__(self) -> str:
        return f"PagerDutySettings(api_url={self.api_url!r}, events_url={self.events_url!r})"


@dataclass(frozen=True, repr=False)
class IntegrationSettings:
    """All three services' settings, from the environment and ``charter.toml``."""

    github: GitHubSettings = field(default_factory=GitHubSettings)
    slack: SlackSettings = field(default_factory=SlackSettings)
    pagerduty: PagerDutySettings = field(default_factory=PagerDutySettings)

    @classmethod
    def load(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        toml: Mapping[str, Any] | None = None,
        base_dir: Path | None = None,
    ) -> IntegrationSettings:
        """Read ``env`` (default ``os.environ``) over ``toml`` (a parsed charter.toml).

        ``GITHUB_APP_PRIVATE_KEY_PATH`` (or ``private_key_path``) is read here, relative
        to ``base_dir``; an unreadable key file is a :class:`CredentialsMissing` naming it.
        """
        env = os.environ if env is None else env
        section = (toml or {}).get("integrations") or {}
        gh: Mapping[str, Any] = section.get("github") or {}
        sl: Mapping[str, Any] = section.get("slack") or {}
        pd: Mapping[str, Any] = section.get("pagerduty") or {}

        def pick(var: str, table: Mapping[str, Any], key: str, default: str | None) -> Any:
            value = env.get(var)
            if value:
                return value
            got = table.get(key)
            return str(got) if got not in (None, "") else default

        ca = env.get("CHARTER_CA_BUNDLE") or None
        key = env.get("GITHUB_APP_PRIVATE_KEY") or None
        key_path = pick("GITHUB_APP_PRIVATE_KEY_PATH", gh, "private_key_path", None)
        if key is None and key_path:
            path = Path(key_path).expanduser()
            if not path.is_absolute() and base_dir is not None:
                path = base_dir / path
            try:
                key = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise CredentialsMissing(
                    "github",
                    f"GITHUB_APP_PRIVATE_KEY_PATH {str(path)!r} cannot be read: {exc.strerror}",
                ) from None
        github = GitHubSettings(
            api_url=pick("GITHUB_API_URL", gh, "api_url", GITHUB_API_URL),
            token=env.get("GITHUB_TOKEN") or env.get("GH_TOKEN") or None,
            app_id=pick("GITHUB_APP_ID", gh, "app_id", None),
            private_key=key,
            ca_bundle=ca,
            merge_method=str(gh.get("merge_method") or "squash"),
        )
        slack = SlackSettings(
            api_url=pick("SLACK_API_URL", sl, "api_url", SLACK_API_URL),
            bot_token=env.get("SLACK_BOT_TOKEN") or None,
        )
        pagerduty = PagerDutySettings(
            api_url=pick("PAGERDUTY_API_URL", pd, "api_url", PAGERDUTY_API_URL),
            events_url=pick("PAGERDUTY_EVENTS_URL", pd, "events_url", PAGERDUTY_EVENTS_URL),
            token=env.get("PAGERDUTY_TOKEN") or None,
            routing_key=env.get("PAGERDUTY_ROUTING_KEY") or None,
            from_email=pick("PAGERDUTY_FROM", pd, "from_email", None),
            ca_bundle=ca,
        )
        return cls(github, slack, pagerduty)

    @classmethod
    def for_pack(cls, pack_dir: Path, env: Mapping[str, str] | None = None) -> IntegrationSettings:
        """:meth:`load` with the ``[integrations]`` tables of ``pack_dir/charter.toml``."""
        import tomllib

        toml: dict[str, Any] = {}
        path = Path(pack_dir) / "charter.toml"
        if path.is_file():
            with path.open("rb") as fh:
                toml = tomllib.load(fh)
        return cls.load(env, toml=toml, base_dir=Path(pack_dir))

    def secrets(self) -> tuple[str, ...]:
        """Every credential value, for redaction."""
        return self.github.secrets() + self.slack.secrets() + self.pagerduty.secrets()


__all__ = [
    "CREDENTIAL_VARS",
    "GitHubSettings",
    "IntegrationSettings",
    "PagerDutySettings",
    "SlackSettings",
]
