"""Network targets (URLs, hosts) and domain rules (``example.com``, ``*.example.com``, ``*``).

A target is parsed the way the fetcher reads it: the WHATWG URL standard, through Ada (the
parser Node.js uses, via the ``ada-url`` package), so ``https://evil.com\\@api.github.com``
is ``evil.com``, ``http://127.1`` and ``http://0x7f.1`` are ``127.0.0.1``, an invalid port
is an error and a Unicode host is its punycode. Python's ``urlsplit`` reads several of
these differently; a policy that parses unlike the client is a bypass.

Schemes are allowed explicitly: a rule without a scheme covers ``http`` and ``https`` (and
a bare host); ``wss://stream.example.com`` or ``ftp://*`` name another one. A deny rule
without a scheme denies the host whatever the scheme.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from charter.errors import CharterError

#: Schemes a rule that names none covers.
DEFAULT_SCHEMES: frozenset[str] = frozenset({"http", "https"})

_ada: Any = None


class HostError(CharterError, ValueError):
    """A network target whose host cannot be determined."""


def _hostname(text: str) -> tuple[str, int]:
    global _ada
    if _ada is None:  # ~35 ms to import; most commands never parse a URL
        import ada_url

        _ada = ada_url
    parts = _ada.parse_url(text, attributes=("hostname", "host_type"))
    return str(parts["hostname"] or ""), int(parts["host_type"])


@lru_cache(maxsize=4096)
def parse_target(value: str) -> tuple[str, str | None]:
    """``(host, scheme)`` of a URL, or ``(host, None)`` for a bare ``host[:port][/...]``."""
    text = value.strip()
    if not text:
        raise HostError("empty network target")
    if "\x00" in text:
        raise HostError(f"network target {value!r} contains a NUL byte")
    if text.count(":") >= 2 and "://" not in text:  # a bare IPv6 literal ("::1", "[::1]")
        try:
            return str(ipaddress.ip_address(text.strip("[]"))), None
        except ValueError:
            pass
    scheme: str | None = None
    head, sep, _ = text.partition(":")
    if sep and head and head[0].isalpha() and all(c.isalnum() or c in "+-." for c in head):
        after = text[len(head) + 1 :]
        # "host:443" is a bare host with a port, "scheme:..." a URL
        if not after[:1].isdigit() or after.startswith("//"):
            scheme = head.lower()
    try:
        host, kind = _hostname(text if scheme is not None else "http://" + text)
    except ValueError as exc:
        raise HostError(
            f"cannot parse network target {value!r} as a URL (bad host, port or syntax)"
        ) from exc
    host = host.rstrip(".").lower()
    if not host:
        raise HostError(f"network target {value!r} names no host")
    if kind == 2:  # IPv6: ada gives "[::1]"; one canonical spelling
        host = str(ipaddress.ip_address(host.strip("[]")))
    return host, scheme


def host_of(value: str) -> str:
    """The canonical host a URL or bare host names (lower-case, no port, no trailing dot)."""
    return parse_target(value)[0]


@dataclass(frozen=True, slots=True)
class DomainRule:
    """``*`` (any host), ``*.example.com`` (strict subdomains) or an exact host, optionally
    behind a scheme (``wss://*.example.com``)."""

    text: str
    host: str
    subdomains: bool
    scheme: str | None = None

    @classmethod
    def parse(cls, text: str) -> DomainRule:
        raw = text.strip().lower().rstrip(".")
        if not raw:
            raise ValueError("a network rule cannot be blank")
        scheme: str | None = None
        if "://" in raw:
            scheme, _, raw = raw.partition("://")
            raw = raw.rstrip("/")
            if not scheme or not all(c.isalnum() or c in "+-." for c in scheme):
                raise ValueError(f"network rule {text!r}: expected scheme://host")
        shape = "'*', '*.domain' or a host name, optionally behind scheme://"
        if not raw or any(ch.isspace() or ch in "/@?#\\" for ch in raw):
            raise ValueError(f"network rule {text!r}: expected {shape}")
        if raw == "*":
            return cls(text, "*", False, scheme)
        if raw.startswith("*."):
            rest = raw[2:]
            if not rest or "*" in rest:
                raise ValueError(f"network rule {text!r}: expected {shape}")
            return cls(text, host_of(rest), True, scheme)
        if "*" in raw:
            raise ValueError(f"network rule {text!r}: expected {shape}")
        return cls(text, host_of(raw), False, scheme)

    def matches_host(self, host: str) -> bool:
        if self.host == "*":
            return True
        if self.subdomains:
            return host.endswith("." + self.host)
        return host == self.host

    def matches(self, host: str, scheme: str | None = None, *, deny: bool = False) -> bool:
        """Whether the rule covers ``host`` reached by ``scheme`` (``None``: a bare host)."""
        if not self.matches_host(host):
            return False
        if self.scheme is not None:
            return scheme == self.scheme or (scheme is None and deny)
        return deny or scheme is None or scheme in DEFAULT_SCHEMES
