"""Network targets (URLs, hosts) and domain rules (``example.com``, ``*.example.com``, ``*``)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit


class HostError(ValueError):
    """A network target whose host cannot be determined."""


def host_of(value: str) -> str:
    """The canonical host a URL or bare host names (lower-case, no port, no trailing dot)."""
    text = value.strip()
    if not text:
        raise HostError("empty network target")
    if "://" not in text:
        text = "//" + text
    try:
        parts = urlsplit(text)
        host = parts.hostname
    except ValueError as exc:
        raise HostError(f"cannot parse network target {value!r}: {exc}") from exc
    if not host:
        raise HostError(f"network target {value!r} names no host")
    host = host.rstrip(".").lower()
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError as exc:
        raise HostError(f"network target {value!r} has an invalid host name") from exc


@dataclass(frozen=True, slots=True)
class DomainRule:
    """``*`` (any host), ``*.example.com`` (strict subdomains) or an exact host."""

    text: str
    host: str
    subdomains: bool

    @classmethod
    def parse(cls, text: str) -> DomainRule:
        raw = text.strip().lower().rstrip(".")
        if not raw:
            raise ValueError("a network rule cannot be blank")
        if any(ch.isspace() or ch in "/@?#" for ch in raw):
            raise ValueError(f"network rule {text!r}: expected '*', '*.domain' or a host name")
        if raw == "*":
            return cls(text, "*", False)
        if raw.startswith("*."):
            rest = raw[2:]
            if not rest or "*" in rest:
                raise ValueError(f"network rule {text!r}: expected '*', '*.domain' or a host")
            return cls(text, host_of(rest), True)
        if "*" in raw:
            raise ValueError(f"network rule {text!r}: expected '*', '*.domain' or a host")
        return cls(text, host_of(raw), False)

    def matches(self, host: str) -> bool:
        if self.host == "*":
            return True
        if self.subdomains:
            return host.endswith("." + self.host)
        return host == self.host
