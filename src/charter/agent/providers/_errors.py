"""Map SDK exceptions (openai / anthropic share a shape) to :class:`ProviderError`."""

from __future__ import annotations

import json
from typing import Any

from .base import ProviderError, classify_status


def _api_error(sdk: Any) -> tuple[type[BaseException], ...]:
    cls = getattr(sdk, "APIError", None)
    return (cls,) if isinstance(cls, type) else ()


def sdk_error(exc: BaseException, provider: str, sdk: Any) -> ProviderError:
    """Classify an exception raised by an official SDK (or by JSON decoding of a reply)."""
    status = getattr(exc, "status_code", None)
    kind = type(exc).__name__
    message = str(getattr(exc, "message", None) or exc) or kind
    if isinstance(exc, getattr(sdk, "APIStatusError", ())):
        from ..retrying import parse_retry_after

        category = classify_status(status)
        response = getattr(exc, "response", None)
        return ProviderError(
            message,
            category=category,
            reason=f"http_{status}",
            kind=kind,
            status_code=status,
            provider=provider,
            retry_after=parse_retry_after(getattr(response, "headers", None)),
        )
    if isinstance(exc, getattr(sdk, "APITimeoutError", ())):
        return ProviderError(
            message, category="timeout", reason="timeout", kind=kind, provider=provider
        )
    if isinstance(exc, getattr(sdk, "APIConnectionError", ())):
        return ProviderError(
            message, category="connection", reason="connection_error", kind=kind, provider=provider
        )
    if isinstance(exc, (json.JSONDecodeError, ValueError, KeyError, TypeError, *_api_error(sdk))):
        return ProviderError(
            message,
            category="protocol",
            reason="malformed_response",
            kind=kind,
            retryable=False,
            provider=provider,
        )
    return ProviderError(
        message,
        category="client",
        reason="unexpected",
        kind=kind,
        retryable=False,
        provider=provider,
    )


def parse_arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """Tool-call arguments from a JSON string (or dict); an error text when malformed."""
    if isinstance(raw, dict):
        return raw, None
    if not raw:
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, f"tool-call arguments are not valid JSON: {exc}"
    if not isinstance(value, dict):
        return {}, "tool-call arguments must be a JSON object"
    return value, None
