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


#: The port a scheme uses when a URL names none.
DEFAULT_PORTS: dict[str, int] = {"http": 80, "https": 443, "ws": 80, "wss": 443}


@lru_cache(maxsize=4096)
def port_of(value: str) -> int | None:
    """The port a URL or bare ``host:port`` reaches: the explicit one, else the scheme's
    default (``None`` for a bare host without a port, or an unknown scheme)."""
    scheme = parse_target(value)[1]
    text = value.strip()
    global _ada
    if _ada is None:
        import ada_url

        _ada = ada_url
    try:
        url = text if scheme is not None else "http://" + text
        parts = _ada.parse_url(url, attributes=("port",))
    except ValueError:
        return None
    if parts["port"]:
        return int(parts["port"])
    if scheme is None:
        # ada drops a bare host's ":80" (the http default it parsed it with)
        tail = text.rsplit("]", 1)[-1] if text.startswith("[") else text.split("/", 1)[0]
        head, sep, port = tail.rpartition(":")
        return int(port) if sep and head and port.isdigit() else None
    return DEFAULT_PORTS.get(scheme)


def host_of(value: str) -> str:
    """The canonical host a URL or bare host names (lower-case, no port, no trailing dot)."""
    return parse_target(value)[0]


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=4096)
def address_of(host: str) -> IPAddress | None:
    """``host`` as an address when it is one (``[...]`` stripped), IPv4-mapped IPv6
    (``::ffff:127.0.0.1``) as the IPv4 address it reaches; ``None`` for a name."""
    try:
        addr = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def reaches_this_host(addr: IPAddress) -> bool:
    """Whether connecting to ``addr`` reaches the local machine: any loopback address
    (``127.0.0.0/8``, ``::1``) or the unspecified one (``0.0.0.0``, ``::``), which Linux
    connects to loopback."""
    return addr.is_loopback or addr.is_unspecified


def _is_localhost_name(host: str) -> bool:
    # RFC 6761: ``localhost`` and every name under it are loopback
    return host == "localhost" or host.endswith(".localhost")


@dataclass(frozen=True, slots=True)
class DomainRule:
    """``*`` (any host), ``*.example.com`` (strict subdomains), an exact host, an address
    or a CIDR range (``10.0.0.0/8``, ``fd00::/8``), optionally behind a scheme
    (``wss://*.example.com``) and with a port (``http://127.0.0.1:8080``: only that port;
    without one, any).

    Addresses match as addresses: ``[::ffff:127.0.0.1]`` is ``127.0.0.1``. A *deny* rule
    naming the local machine (``localhost``, a loopback address, ``0.0.0.0``) denies every
    way of reaching it: all of ``127.0.0.0/8``, ``::1``, ``0.0.0.0``, ``::`` and
    ``*.localhost``. Allow rules stay exact.
    """

    text: str
    host: str
    subdomains: bool
    scheme: str | None = None
    port: int | None = None
    network: IPNetwork | None = None

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
        shape = (
            "'*', '*.domain', a host name, an address or a CIDR range, optionally behind scheme://"
        )
        network = _network(raw)
        if network is not None:
            return cls(text, str(network.network_address), False, scheme, network=network)
        if not raw or any(ch.isspace() or ch in "/@?#\\" for ch in raw):
            raise ValueError(f"network rule {text!r}: expected {shape}")
        port: int | None = None
        if not raw.startswith("*") and ":" in raw:
            port = port_of(f"{scheme}://{raw}" if scheme else raw)
        if raw == "*":
            return cls(text, "*", False, scheme)
        if raw.startswith("*."):
            rest = raw[2:]
            if not rest or "*" in rest:
                raise ValueError(f"network rule {text!r}: expected {shape}")
            return cls(text, host_of(rest), True, scheme)
        if "*" in raw:
            raise ValueError(f"network rule {text!r}: expected {shape}")
        return cls(text, host_of(raw), False, scheme, port)

    @property
    def names_this_host(self) -> bool:
        """Whether the rule names the local machine (``localhost``, loopback, unspecified)."""
        if self.network is not None:
            return any(
                reaches_this_host(a) for a in (self.network.network_address, self.network[-1])
            )
        return not self.subdomains and _is_localhost_name(self.host)

    def matches_host(self, host: str, *, deny: bool = False) -> bool:
        if self.host == "*":
            return True
        addr = address_of(host)
        if deny and self.names_this_host:
            if addr is not None and reaches_this_host(addr):
                return True
            if addr is None and _is_localhost_name(host):
                return True
        if self.network is not None:
            return addr is not None and addr in self.network
        if self.subdomains:
            return host.endswith("." + self.host)
        return host == self.host

    def matches(
        self, host: str, scheme: str | None = None, *, deny: bool = False, port: int | None = None
    ) -> bool:
        """Whether the rule covers ``host`` reached by ``scheme`` (``None``: a bare host)
        on ``port`` (``None``: not known; a rule naming a port then allows nothing and
        denies the host)."""
        if not self.matches_host(host, deny=deny):
            return False
        if self.port is not None and port != self.port and not (deny and port is None):
            return False
        if self.scheme is not None:
            return scheme == self.scheme or (scheme is None and deny)
        return deny or scheme is None or scheme in DEFAULT_SCHEMES


def _network(raw: str) -> IPNetwork | None:
    """A rule that is an address (``127.0.0.1``, ``[::1]``, ``::ffff:10.0.0.1``) or a CIDR
    range (``10.0.0.0/8``) as a network; ``None`` for a name. IPv4-mapped IPv6 is IPv4."""
    text = raw.strip("[]") if "/" not in raw else raw.replace("[", "").replace("]", "")
    try:
        net = ipaddress.ip_network(text, strict=False)
    except ValueError:
        addr = address_of(text) if "/" not in text else None
        if addr is None:
            return None
        net = ipaddress.ip_network(addr)
    if isinstance(net, ipaddress.IPv6Network) and net.network_address.ipv4_mapped is not None:
        mapped = net.network_address.ipv4_mapped
        return ipaddress.ip_network(f"{mapped}/{max(net.prefixlen - 96, 0)}", strict=False)
    return net
