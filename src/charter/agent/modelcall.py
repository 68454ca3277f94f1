"""The loop's model calls: the ``llm_caller`` chain, or the provider itself, in a span.

With no ``llm_caller`` the chain is charter's own (the provider, with the legacy
``llm_retries`` applied as :func:`~charter.agent.callers.with_retry` applies them), so no
user code ever sees the caller's ``call`` dict: the provider is then called directly,
without building that dict or the middleware's copies of it on every turn. Replies,
retries, back-off and errors are the same either way.
"""

from __future__ import annotations

import asyncio
import inspect
import types
from collections.abc import Awaitable
from typing import Any

from . import telemetry
from .callers import LlmCaller, checked_reply, with_retry
from .providers import LlmRequest, ProviderError
from .retrying import retry_replies


class ModelCalls:
    """One run's model calls (built on its first call, like the caller chain it replaces)."""

    def __init__(self, run: Any) -> None:
        cfg = run.cfg
        self.run = run
        self.caller: LlmCaller | None = None
        retries = cfg.llm_retries if cfg.wrap_retries else 0
        if cfg.llm_caller is not None:
            caller = cfg.llm_caller
            if retries:
                caller = with_retry(max_attempts=retries + 1, base_ms=cfg.llm_backoff_ms)(caller)
            self.caller = caller
        self.attempts = retries + 1 if retries else 1
        self.base_ms = cfg.llm_backoff_ms
        self.sleep = asyncio.sleep  # taken when built, as with_retry takes it

    def __call__(self, request: LlmRequest, iteration: int) -> Awaitable[dict[str, Any]]:
        """An awaitable of the reply ``{ok, value}`` or ``{ok: False, status, error}``;
        it never raises. A plain function: the common case (no caller, no tracer) hands
        back the provider call's own coroutine, not one wrapped in another per turn."""
        run = self.run
        if self.caller is None:
            reply = self._direct(request)
        else:
            call = {
                "prompt": run.prompt,
                "system": request.system,
                "opts": dict(request.options),
                "turn": {"iteration": iteration, "session_id": run.cfg.session_id, "attempt": 1},
                "request": request,
                "provider": run.provider,
            }
            reply = _reply(self.caller, call)
        if telemetry.tracer() is None:  # no spans wanted: skip building their attributes
            return reply
        return _in_span(reply, request, run.provider, run.cfg.session_id)

    async def _direct(self, request: LlmRequest) -> dict[str, Any]:
        """``with_retry(default_llm_caller(provider))`` without the dicts between them."""
        first = await self._attempt(request)
        if first["ok"] or self.attempts <= 1:
            return first
        return await retry_replies(
            first,
            lambda _attempt: self._attempt(request),
            attempts=self.attempts,
            base_ms=self.base_ms,
            sleep=self.sleep,
        )

    async def _attempt(self, request: LlmRequest) -> dict[str, Any]:
        try:
            value = await self.run.provider.complete(request)
        except ProviderError as exc:
            return {"ok": False, "status": "provider_error", "error": exc}
        except Exception as exc:  # a failure is a reply, not a crash (and not retried)
            return {"ok": False, "status": "provider_error", "error": exc}
        return {"ok": True, "value": value}


async def _reply(caller: LlmCaller, call: dict[str, Any]) -> dict[str, Any]:
    try:
        reply = caller(call)
        if type(reply) is types.CoroutineType or inspect.isawaitable(reply):
            reply = await reply
        return checked_reply(reply)
    except Exception as exc:
        return {"ok": False, "status": "provider_error", "error": exc}


async def _in_span(
    reply: Awaitable[dict[str, Any]], request: LlmRequest, provider: Any, session_id: str
) -> dict[str, Any]:
    """Await ``reply`` inside a GenAI ``chat`` span."""
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": getattr(provider, "name", None),
        "gen_ai.request.model": request.model,
        "gen_ai.conversation.id": session_id,
    }
    with telemetry.span(f"chat {request.model or ''}".strip(), attributes) as current:
        result = await reply
        if result.get("ok"):
            response = result["value"]
            telemetry.annotate(
                current,
                {
                    "gen_ai.response.model": getattr(response, "model", None),
                    "gen_ai.usage.input_tokens": getattr(response, "input_tokens", None),
                    "gen_ai.usage.output_tokens": getattr(response, "output_tokens", None),
                },
            )
        else:
            telemetry.error(current, str(result.get("status") or "provider_error"))
        return result
