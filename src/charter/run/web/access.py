"""Who may use the console: loopback without a token, otherwise a named bearer token.

``CHARTER_CONSOLE_TOKENS`` holds ``name:token`` pairs separated by commas. When it is set,
every page and API call needs one of the tokens (``Authorization: Bearer``, or the
HttpOnly cookie the login form sets) and the approver's identity is that token's
*name*, never a form field. Without it the console only serves on a loopback address,
as the local user. Every POST also carries a CSRF token bound to the identity.
"""

from __future__ import annotations

import getpass
import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

from charter.errors import CharterError

TOKENS_ENV = "CHARTER_CONSOLE_TOKENS"
COOKIE = "charter_console"


class AccessError(CharterError, ValueError):
    """The access configuration is unusable (e.g. a public bind without a token)."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_tokens(text: str) -> dict[str, str]:
    """``name:token,name:token`` -> ``{token: name}`` (raises AccessError)."""
    table: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, token = item.partition(":")
        if not sep or not name.strip() or len(token.strip()) < 16:
            raise AccessError(
                f"${TOKENS_ENV}: expected name:token pairs (tokens of 16+ characters), "
                f"got an entry starting {item[:8]!r}"
            )
        table[token.strip()] = name.strip()
    return table


@dataclass(frozen=True)
class Access:
    """The token table (token -> name) and the per-process CSRF key."""

    tokens: Mapping[str, str]
    local_user: str | None = None  # the identity on loopback without tokens
    csrf_key: bytes = field(default_factory=lambda: secrets.token_bytes(32))

    @classmethod
    def from_env(cls, environ: Mapping[str, str], *, host: str) -> Access:
        tokens = parse_tokens(environ.get(TOKENS_ENV, ""))
        if tokens:
            return cls(tokens)
        if not is_loopback(host):
            raise AccessError(
                f"binding {host} (not loopback) needs ${TOKENS_ENV} (name:token pairs)"
            )
        return cls({}, local_user=f"local:{getpass.getuser()}")

    @property
    def open(self) -> bool:
        return not self.tokens

    def identify(self, bearer: str | None, cookie: str | None) -> str | None:
        """The identity for these credentials, or None (refuse)."""
        if self.open:
            return self.local_user
        for candidate in (bearer, cookie):
            if not candidate:
                continue
            for token, name in self.tokens.items():
                if hmac.compare_digest(token.encode(), candidate.encode()):
                    return name
        return None

    def csrf_token(self, identity: str) -> str:
        return hmac.new(self.csrf_key, identity.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, identity: str, presented: str | None) -> bool:
        return bool(presented) and hmac.compare_digest(self.csrf_token(identity), str(presented))


__all__ = ["COOKIE", "TOKENS_ENV", "Access", "AccessError", "is_loopback", "parse_tokens"]
