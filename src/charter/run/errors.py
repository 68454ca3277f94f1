"""Errors of ``charter.run``."""

from __future__ import annotations

from typing import Any

from charter.errors import CharterError


class RunError(CharterError):
    """A run cannot start: unknown persona, invalid manifest, bad input (the caller's fault)."""


class UnknownPersona(RunError):
    """The named persona is not in the manifest (bad input: exit 2 from the CLI)."""


class ManifestInvalid(RunError):
    """The manifest does not validate; a persona never runs under a charter that fails checks."""


class ForeignWorkflow(RunError):
    """The persona's entry workflow is for another host (``manifest.harn#run``): charter
    cannot execute it, so nothing is admitted (exit 2 from the CLI)."""


class WorkflowLoadError(RunError):
    """The entry workflow or a context pack cannot be loaded."""


class ReceiptError(CharterError, RuntimeError):
    """A receipt the persona's ``receipt_policy = "required"`` demands could not be written."""


class LeaseLost(ReceiptError):
    """The run no longer holds its lease (it expired, or another process or host recovered
    it): what it was about to do does not happen, whatever the receipt policy."""


class PricingError(CharterError, RuntimeError):
    """The price table is malformed, or (strict mode) a model has no price."""


class ApprovalError(RunError):
    """An approval cannot be resolved: unknown, already resolved, or its run is not live."""


class ModelProviderFailed(CharterError, RuntimeError):
    """The model provider failed after retries and fallbacks (no key, unreachable, 401/429/5xx,
    malformed reply): the agent call did not happen, so the run is failed, not completed.

    A workflow may catch it to degrade on purpose; ``result`` is the agent loop's result.
    """

    def __init__(self, result: Any) -> None:
        error = dict(getattr(result, "error", None) or {})
        where = "/".join(str(error[k]) for k in ("category", "reason") if error.get(k))
        super().__init__(
            f"model provider {error.get('provider') or '?'} failed"
            + (f" ({where})" if where else "")
            + f": {error.get('message') or 'no detail'}"
        )
        self.result = result
        self.error = error


class RunStopped(BaseException):
    """Raised into a workflow when the run must stop (budget exhausted, receipts failing).

    A ``BaseException`` so that a workflow's ``except Exception`` does not swallow it.
    """

    def __init__(self, status: str, detail: dict[str, Any]) -> None:
        super().__init__(f"{status}: {detail.get('message') or detail.get('reason')}")
        self.status = status
        self.detail = detail


__all__ = [
    "ApprovalError",
    "LeaseLost",
    "ManifestInvalid",
    "ModelProviderFailed",
    "PricingError",
    "ReceiptError",
    "RunError",
    "RunStopped",
    "WorkflowLoadError",
]
