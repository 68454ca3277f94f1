"""GitHub authentication as teams deploy it: a token, or a GitHub App's installation tokens.

An App authenticates as itself with a JWT signed by its private key (githubkit's
``AppAuthStrategy``), finds the installation on the repository
(``GET /repos/{owner}/{repo}/installation``, unless the webhook named it) and mints an
installation token (``POST /app/installations/{id}/access_tokens``). The token is kept
until ``refresh_margin`` seconds before its ``expires_at`` (by the injected clock), then
minted again, so no call goes out with a token about to expire.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..settings import GitHubSettings

if TYPE_CHECKING:
    from githubkit import GitHub

Clock = Callable[[], float]


@dataclass(frozen=True)
class InstallationToken:
    token: str
    expires_at: float
    installation_id: int


def parse_expiry(text: str) -> float:
    """GitHub's ``expires_at`` (``2026-11-28T21:00:00Z``) as epoch seconds."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class AppInstallationTokens:
    """Installation tokens of one GitHub App, per installation, refreshed before expiry."""

    def __init__(
        self,
        settings: GitHubSettings,
        *,
        client_factory: Callable[[Any], GitHub[Any]],
        clock: Clock = time.time,
        refresh_margin: float = 300.0,
        on_token: Callable[[str], None] = lambda _token: None,
    ) -> None:
        self.settings = settings
        self._factory = client_factory
        self._clock = clock
        self._margin = refresh_margin
        self._on_token = on_token
        self._tokens: dict[int, InstallationToken] = {}
        self._installations: dict[str, int] = {}
        self._lock = asyncio.Lock()

    def app_client(self) -> GitHub[Any]:
        from githubkit import AppAuthStrategy

        assert self.settings.app_id and self.settings.private_key
        return self._factory(AppAuthStrategy(self.settings.app_id, self.settings.private_key))

    async def installation_id(self, owner: str, repo: str) -> int:
        key = f"{owner}/{repo}".lower()
        if key not in self._installations:
            app = self.app_client()  # held: githubkit's namespaces keep only a weak reference
            resp = await app.rest.apps.async_get_repo_installation(owner, repo)
            self._installations[key] = int(resp.json()["id"])
        return self._installations[key]

    async def token(self, owner: str, repo: str, installation_id: int | None = None) -> str:
        """A live installation token for ``owner/repo`` (minted or refreshed as needed)."""
        async with self._lock:
            iid = installation_id or await self.installation_id(owner, repo)
            held = self._tokens.get(iid)
            if held is not None and self._clock() < held.expires_at - self._margin:
                return held.token
            app = self.app_client()
            resp = await app.rest.apps.async_create_installation_access_token(iid)
            data = resp.json()
            minted = InstallationToken(str(data["token"]), parse_expiry(data["expires_at"]), iid)
            self._on_token(minted.token)
            self._tokens[iid] = minted
            return minted.token
