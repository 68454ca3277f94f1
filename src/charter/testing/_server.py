"""A small threaded HTTP(S) server on 127.0.0.1 that records every request.

The fakes of :mod:`charter.testing` are built on it: routes are ``(method, regex,
handler)``; each request is recorded (method, path, query, headers, body) before it is
answered; :meth:`FakeServer.fail_next` injects provider-shaped failures (a 5xx, a rate
limit) for the next matching requests. ``tls=True`` serves HTTPS with a self-signed
certificate for 127.0.0.1 whose file is :attr:`FakeServer.ca_file`.
"""

from __future__ import annotations

import json
import re
import socket
import ssl
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class RecordedRequest:
    """One request as it reached the fake."""

    method: str
    path: str
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"null")

    def form(self) -> dict[str, str]:
        """An ``application/x-www-form-urlencoded`` body (Slack's default) as a dict."""
        return {k: v[-1] for k, v in parse_qs(self.body.decode("utf-8")).items()}

    def to_dict(self) -> dict[str, Any]:
        try:
            body: Any = self.json()
        except ValueError:
            body = self.body.decode("utf-8", "replace")
        return {"method": self.method, "path": self.path, "body": body}


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json; charset=utf-8"

    def encode(self) -> bytes:
        if self.body is None:
            return b""
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode("utf-8")
        return json.dumps(self.body).encode("utf-8")


Handler = Callable[[RecordedRequest, "re.Match[str]"], Reply]


@dataclass
class _Failure:
    method: str
    pattern: re.Pattern[str]
    reply: Callable[[], Reply]
    times: int


class FakeServer:
    """Base class: subclasses add routes in ``__init__`` with :meth:`route`."""

    service = "fake"

    def __init__(self, *, tls: bool = False, prefix: str = "") -> None:
        self.requests: list[RecordedRequest] = []
        self._routes: list[tuple[str, re.Pattern[str], Handler]] = []
        self._failures: list[_Failure] = []
        self._lock = threading.RLock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.tls = tls
        #: where the API is mounted (GitHub Enterprise Server: ``/api/v3``); requests
        #: outside it are 404, and ``requests`` record paths without it
        self.prefix = prefix.rstrip("/")
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.ca_file: str | None = None

    # -- setup -----------------------------------------------------------------

    def route(self, method: str, pattern: str, handler: Handler) -> None:
        self._routes.append((method, re.compile(f"^{pattern}$"), handler))

    def fail_next(
        self, method: str, path_pattern: str, reply: Callable[[], Reply], *, times: int = 1
    ) -> None:
        """Answer the next ``times`` requests matching ``method`` and ``path_pattern``
        (a regex over the path) with ``reply()`` instead of the route."""
        with self._lock:
            self._failures.append(_Failure(method, re.compile(f"^{path_pattern}$"), reply, times))

    # -- lifecycle -------------------------------------------------------------

    @property
    def url(self) -> str:
        assert self._httpd is not None, "the fake is not started"
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self._httpd.server_address[1]}{self.prefix}"

    def start(self) -> FakeServer:
        server = self

        class _H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def setup(self) -> None:
                super().setup()
                # headers and body go out as separate writes: without this, Nagle's
                # algorithm and the client's delayed ACK hold the body back ~40 ms
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                request = RecordedRequest(
                    self.command,
                    parts.path,
                    parse_qs(parts.query),
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
                reply = server.handle(request)
                data = reply.encode()
                self.send_response(reply.status)
                headers = {"Content-Type": reply.content_type, **reply.headers}
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _H)
        httpd.daemon_threads = True
        if self.tls:
            self._tmp = tempfile.TemporaryDirectory(prefix="charter-fake-tls-")
            cert, key = _self_signed(Path(self._tmp.name))
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert, key)
            httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
            self.ca_file = str(cert)
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- dispatch --------------------------------------------------------------

    def handle(self, request: RecordedRequest) -> Reply:
        if self.prefix:
            if not request.path.startswith(self.prefix + "/"):
                return self.not_found(request)
            request = replace(request, path=request.path[len(self.prefix) :])
        with self._lock:
            self.requests.append(request)
            for failure in self._failures:
                if failure.method == request.method and failure.pattern.match(request.path):
                    failure.times -= 1
                    if failure.times <= 0:
                        self._failures.remove(failure)
                    return failure.reply()
            for method, pattern, handler in self._routes:
                match = pattern.match(request.path)
                if match and method == request.method:
                    return handler(request, match)
        return self.not_found(request)

    def not_found(self, request: RecordedRequest) -> Reply:
        return Reply(404, {"error": "not_found", "path": request.path})

    def requests_to(self, method: str, path_pattern: str) -> list[RecordedRequest]:
        """The recorded requests with ``method`` whose path matches ``path_pattern``."""
        pattern = re.compile(f"^{path_pattern}$")
        with self._lock:
            return [r for r in self.requests if r.method == method and pattern.match(r.path)]


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 / localhost (cryptography)."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "charter fake")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path
