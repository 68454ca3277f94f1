"""What every integration tool wraps its operation in: the redacted handler and the
dry-run preview (Slack and PagerDuty; GitHub's carries its repository binding too)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ._redact import Redactor
from .errors import IntegrationError


def guard(redact: Redactor, fn: Callable[..., dict[str, Any]]) -> Callable[..., Any]:
    """``fn`` as a tool handler: its result, or its error as the model's observation,
    redacted either way."""

    def run(**arguments: Any) -> Any:
        try:
            return redact(fn(**arguments))
        except IntegrationError as exc:
            return redact(exc.to_observation())
        except (TypeError, ValueError) as exc:
            return redact({"status": "error", "error": "invalid_arguments", "message": str(exc)})

    return run


def preview(build: Callable[..., dict[str, Any]], url: str) -> Callable[[Mapping[str, Any]], Any]:
    """The exact request ``build`` would send to ``url``, for dry runs and approvals."""

    def show(arguments: Mapping[str, Any]) -> Any:
        try:
            request = build(**arguments)
        except (TypeError, ValueError) as exc:
            return {"error": f"invalid arguments: {exc}"}
        return {"url": url.rstrip("/") + request["path"], **request}

    return show
