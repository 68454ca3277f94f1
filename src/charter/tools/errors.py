"""The integrations' errors, one tree::

    IntegrationError                 every failure of charter.tools
    ├── CredentialsMissing           no token / App key configured for the service
    ├── ConnectionFailed             the service could not be reached (after retries)
    └── RemoteError                  the service answered with an error status
        ├── Unauthorized             401: the token is wrong or expired
        ├── Forbidden                403: the token may not do this (missing permission)
        ├── NotFound                 404: no such repository / PR / incident (or no access)
        ├── Conflict                 409: e.g. the PR's head moved since it was reviewed
        ├── Unprocessable            422: the request was invalid (GitHub's "Validation Failed")
        ├── RateLimited              403/429 with a rate limit, still limited after retries
        └── ServiceUnavailable       5xx, still failing after retries

A tool turns any of them into an observation the model sees (:meth:`to_observation`):
``{"status": "error", "error": <kind>, "http_status", "message", "request_id", ...}``
with the provider's own message, never a credential.
"""

from __future__ import annotations

from typing import Any

from charter.errors import CharterError


class IntegrationError(CharterError):
    """A GitHub, Slack or PagerDuty operation failed."""

    kind = "integration_error"

    def __init__(self, service: str, message: str) -> None:
        super().__init__(f"{service}: {message}")
        self.service = service
        self.message = message

    def to_observation(self) -> dict[str, Any]:
        """What the model (and the receipt) sees."""
        return {
            "status": "error",
            "error": self.kind,
            "service": self.service,
            "message": self.message,
        }


class CredentialsMissing(IntegrationError):
    kind = "credentials_missing"


class ConnectionFailed(IntegrationError):
    kind = "connection_failed"


class RemoteError(IntegrationError):
    """The service answered ``http_status``; ``message`` is the provider's own text."""

    kind = "remote_error"

    def __init__(
        self,
        service: str,
        message: str,
        *,
        http_status: int,
        request_id: str | None = None,
        documentation_url: str | None = None,
        details: Any = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(service, message)
        self.http_status = http_status
        self.request_id = request_id
        self.documentation_url = documentation_url
        self.details = details
        self.retry_after = retry_after

    def to_observation(self) -> dict[str, Any]:
        out = super().to_observation()
        out["http_status"] = self.http_status
        out["request_id"] = self.request_id
        if self.documentation_url:
            out["documentation_url"] = self.documentation_url
        if self.details:
            out["details"] = self.details
        if self.retry_after is not None:
            out["retry_after"] = self.retry_after
        return out


class Unauthorized(RemoteError):
    kind = "unauthorized"


class Forbidden(RemoteError):
    kind = "forbidden"


class NotFound(RemoteError):
    kind = "not_found"


class Conflict(RemoteError):
    kind = "conflict"


class Unprocessable(RemoteError):
    kind = "unprocessable"


class RateLimited(RemoteError):
    kind = "rate_limited"


class ServiceUnavailable(RemoteError):
    kind = "service_unavailable"


_BY_STATUS: dict[int, type[RemoteError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: Unprocessable,
    429: RateLimited,
}


def remote_error_class(status: int) -> type[RemoteError]:
    """The error type for an HTTP status (5xx: :class:`ServiceUnavailable`)."""
    if status >= 500:
        return ServiceUnavailable
    return _BY_STATUS.get(status, RemoteError)


__all__ = [
    "Conflict",
    "ConnectionFailed",
    "CredentialsMissing",
    "Forbidden",
    "IntegrationError",
    "NotFound",
    "RateLimited",
    "RemoteError",
    "ServiceUnavailable",
    "Unauthorized",
    "Unprocessable",
    "remote_error_class",
]
