"""Model routing for a run: default / escalation / fallback models, under the live budget.

The run's ``llm_caller`` (see :mod:`charter.agent.callers`) reserves the worst case of
every call against the budget before sending it, charges the actual usage after, and on
a provider error tries the persona's ``fallback_models`` in order. An escalation (the
workflow asks for the frontier model) is counted against ``frontier_escalations``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from charter.agent import LlmRequest, LlmResponse, Provider, ProviderError, ToolCallRequest
from charter.manifest import ModelPolicy

from .budget import BudgetExceeded
from .control import RunControl
from .errors import PricingError, ReceiptError
from .events import RunKind


class ModelRouter:
    def __init__(
        self,
        policy: ModelPolicy,
        control: RunControl,
        provider: Provider,
        *,
        model_override: str | None = None,
        frontier_escalations: int | None = None,
    ) -> None:
        self.policy = policy
        self.control = control
        self.provider = provider
        self.default_model = model_override or policy.default_model
        self.frontier_escalations = frontier_escalations

    def choose(self, escalate: bool = False, *, why: str | None = None) -> str | None:
        """The model for the next agent call; an escalation may be refused by its cap."""
        if not escalate:
            return self.default_model
        control = self.control
        target = self.policy.escalation_model
        cap = self.frontier_escalations
        if target is None or (cap is not None and control.escalations >= cap):
            reason = (
                "no escalation_model in model_policy"
                if target is None
                else f"frontier_escalations cap {cap} reached"
            )
            self._receipt(
                RunKind.MODEL_ESCALATION_REFUSED,
                {"requested": target, "model": self.default_model, "reason": reason, "why": why},
            )
            return self.default_model
        control.escalations += 1
        self._receipt(
            RunKind.MODEL_ESCALATED,
            {"model": target, "from": self.default_model, "count": control.escalations, "why": why},
        )
        return target

    def _receipt(self, kind: str, payload: dict[str, Any]) -> None:
        try:
            self.control.receipts.receipt(kind, payload)
        except ReceiptError as exc:
            self.control.fatal = str(exc)

    def caller(self, provider: Provider | None = None) -> Any:
        """The ``llm_caller`` for one agent call (``provider`` defaults to the run's)."""
        control = self.control
        target: Provider = provider if provider is not None else self.provider
        fallbacks = list(self.policy.fallback_models)

        async def caller(call: dict[str, Any]) -> dict[str, Any]:
            if control.stopping:
                return _stopped("the run is stopping")
            if control.replay is not None:  # a parked run's recorded responses first
                recorded = control.replay.model()
                if recorded is not None:
                    control.journal.models.append(recorded)
                    return {"ok": True, "value": _response(recorded)}
            request: LlmRequest = call["request"]
            models = [request.model, *[m for m in fallbacks if m != request.model]]
            last: Exception | None = None
            for index, model in enumerate(models):
                req = (
                    request if model == request.model else dataclasses.replace(request, model=model)
                )
                try:
                    reservation = control.budget.reserve(model, req)
                    control.receipts.receipt(RunKind.BUDGET_RESERVED, reservation)
                except BudgetExceeded as exc:
                    control.stop = exc.stop
                    return _stopped(exc.stop.message)
                except (PricingError, ReceiptError) as exc:
                    control.fatal = str(exc)
                    return _stopped(str(exc))
                try:
                    value = await target.complete(req)
                except ProviderError as exc:
                    last = exc
                    if index + 1 < len(models):
                        try:
                            control.receipts.receipt(
                                RunKind.MODEL_FALLBACK,
                                {
                                    "model": model,
                                    "fallback": models[index + 1],
                                    "error": exc.to_dict(),
                                },
                            )
                        except ReceiptError as rexc:
                            control.fatal = str(rexc)
                            return _stopped(str(rexc))
                    continue
                usage = control.budget.charge(model, value)
                control.journal.models.append(value.to_dict())
                try:
                    control.receipts.journal(
                        RunKind.USAGE_RECORDED,
                        usage,
                        {
                            "model": value.to_dict(),
                            "run_usd": usage["run_usd"],
                            "run_tokens": usage["run_tokens"],
                        },
                    )
                except ReceiptError as exc:
                    control.fatal = str(exc)
                    return _stopped(str(exc))
                return {"ok": True, "value": value}
            return {"ok": False, "status": "provider_error", "error": last}

        return caller


def _response(data: dict[str, Any]) -> LlmResponse:
    return LlmResponse(
        text=str(data.get("text") or ""),
        tool_calls=tuple(
            ToolCallRequest(str(c["id"]), str(c["name"]), dict(c.get("arguments") or {}))
            for c in data.get("tool_calls") or []
        ),
        input_tokens=int(data.get("input_tokens") or 0),
        output_tokens=int(data.get("output_tokens") or 0),
        finish_reason=data.get("finish_reason"),
        model=data.get("model"),
    )


def _stopped(message: str) -> dict[str, Any]:
    return {
        "ok": False,
        "status": "stopped",
        "error": ProviderError(message, category="budget", reason="run_stopped", retryable=False),
    }


__all__ = ["ModelRouter"]
