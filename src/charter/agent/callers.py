"""Composable LLM callers: the per-turn resilience surface (``llm_caller``).

A caller is ``async (call) -> {"ok": True, "value": LlmResponse}`` or
``{"ok": False, "status": str, "error": ProviderError}``, where ``call`` is
``{"prompt", "system", "opts", "turn": {"iteration", "session_id", "attempt"}, "request",
"provider"}``. Middleware is ``caller -> caller``; :func:`compose` stacks middleware
(first = outermost).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .providers.base import Provider, ProviderError

LlmCaller = Callable[[dict[str, Any]], Any]
Middleware = Callable[[LlmCaller], LlmCaller]


async def call_caller(caller: LlmCaller, call: dict[str, Any]) -> dict[str, Any]:
    """Invoke a sync or async caller and check its reply shape."""
    result = caller(call)
    if inspect.isawaitable(result):
        result = await result
    if not isinstance(result, dict) or "ok" not in result:
        raise TypeError("llm_caller must return a dict with 'ok' (and 'value' or 'error')")
    return result


def default_llm_caller(provider: Provider | None = None) -> LlmCaller:
    """The plain caller: send ``call["request"]`` to ``provider`` (or ``call["provider"]``)."""

    async def caller(call: dict[str, Any]) -> dict[str, Any]:
        target: Provider = provider if provider is not None else call["provider"]
        try:
            value = await target.complete(call["request"])
        except ProviderError as exc:
            return {"ok": False, "status": "provider_error", "error": exc}
        return {"ok": True, "value": value}

    return caller


def with_retry(
    options: dict[str, Any] | None = None,
    *,
    max_attempts: int | None = None,
    backoff: str | None = None,
    base_ms: int | None = None,
    sleep: Callable[[float], Awaitable[None]] | None = None,
) -> Middleware:
    """Retry retryable provider errors (429, 5xx, connection): ``max_attempts`` total tries.

    ``backoff``: ``"exponential"`` (default; ``base_ms * 2**n``), ``"fixed"`` or ``"none"``.
    """
    opts = dict(options or {})
    attempts = int(max_attempts if max_attempts is not None else opts.get("max_attempts", 3))
    mode = str(backoff if backoff is not None else opts.get("backoff", "exponential"))
    base = int(base_ms if base_ms is not None else opts.get("base_ms", 500))
    if attempts < 1:
        raise ValueError("with_retry: max_attempts must be >= 1")
    do_sleep = sleep or asyncio.sleep

    def middleware(inner: LlmCaller) -> LlmCaller:
        async def caller(call: dict[str, Any]) -> dict[str, Any]:
            result: dict[str, Any] = {}
            for attempt in range(attempts):
                turn = dict(call.get("turn") or {})
                turn["attempt"] = attempt + 1
                result = await call_caller(inner, {**call, "turn": turn})
                err = result.get("error")
                if result["ok"] or not (isinstance(err, ProviderError) and err.retryable):
                    return result
                if attempt + 1 < attempts and mode != "none":
                    delay = base if mode == "fixed" else base * (2**attempt)
                    await do_sleep(delay / 1000)
            return result

        return caller

    return middleware


def with_fallback(*fallbacks: LlmCaller | Provider) -> Middleware:
    """On failure, try each fallback caller (or provider) in turn."""
    callers = [default_llm_caller(f) if isinstance(f, Provider) else f for f in fallbacks]

    def middleware(inner: LlmCaller) -> LlmCaller:
        async def caller(call: dict[str, Any]) -> dict[str, Any]:
            result = await call_caller(inner, call)
            for fallback in callers:
                if result["ok"]:
                    break
                result = await call_caller(fallback, call)
            return result

        return caller

    return middleware


def compose(middlewares: Sequence[Middleware]) -> Middleware:
    """``compose([a, b])(caller) == a(b(caller))``."""

    def apply(caller: LlmCaller) -> LlmCaller:
        for middleware in reversed(list(middlewares)):
            caller = middleware(caller)
        return caller

    return apply
