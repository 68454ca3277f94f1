"""Composable LLM callers: the per-turn resilience surface (``llm_caller``).

A caller is ``async (call) -> {"ok": True, "value": LlmResponse}`` or
``{"ok": False, "status": str, "error": ProviderError}``, where ``call`` is
``{"prompt", "system", "opts", "turn": {"iteration", "session_id", "attempt"}, "request",
"provider"}``. Middleware is ``caller -> caller``; :func:`compose` stacks middleware
(first = outermost).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import inspect
import json
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .providers.base import LlmRequest, LlmResponse, Provider, ProviderError
from .retrying import retry_replies

LlmCaller = Callable[[dict[str, Any]], Any]
Middleware = Callable[[LlmCaller], LlmCaller]


async def call_caller(caller: LlmCaller, call: dict[str, Any]) -> dict[str, Any]:
    """Invoke a sync or async caller and check its reply shape."""
    result = caller(call)
    if inspect.isawaitable(result):
        result = await result
    return checked_reply(result)


def checked_reply(result: Any) -> dict[str, Any]:
    """``result`` if it has a caller reply's shape, else :class:`TypeError`."""
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

    ``backoff``: ``"exponential"`` (default; ``base_ms * 2**n`` plus up to ``base_ms`` of
    random jitter), ``"fixed"`` or ``"none"``; a server's ``Retry-After`` longer than
    that is waited out (see :mod:`charter.agent.retrying`).
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
            async def attempt(number: int) -> dict[str, Any]:
                turn = dict(call.get("turn") or {})
                turn["attempt"] = number
                # ``call_caller`` inlined: this wraps every turn of a default loop
                reply = inner({**call, "turn": turn})
                if inspect.isawaitable(reply):
                    reply = await reply
                return checked_reply(reply)

            first = await attempt(1)
            if first["ok"]:
                return first
            return await retry_replies(
                first, attempt, attempts=attempts, base_ms=base, mode=mode, sleep=do_sleep
            )

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


# -- option parsing shared by the middleware below -----------------------------------


def _opts(name: str, options: Any, allowed: tuple[str, ...], **given: Any) -> dict[str, Any]:
    """Merge an options dict with keyword arguments; unknown keys raise naming the field."""
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"{name}: expected an options dict, got {type(options).__name__}")
    out = dict(options or {})
    unknown = sorted(set(out) - set(allowed))
    if unknown:
        raise ValueError(f"{name}: unknown option(s) {', '.join(unknown)}")
    out.update({k: v for k, v in given.items() if v is not None})
    return out


def _positive(name: str, field: str, value: Any, *, integer: bool = True) -> Any:
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or value <= 0:
        kind = "integer" if integer else "number"
        raise ValueError(f"{name}: {field} must be a positive {kind}, got {value!r}")
    return value


def _refusal(status: str, error: ProviderError) -> dict[str, Any]:
    return {"ok": False, "status": status, "error": error}


# -- rate limit ------------------------------------------------------------------------


def with_rate_limit(
    options: dict[str, Any] | None = None,
    *,
    max_calls: int | None = None,
    per_seconds: float | None = None,
    message: str | None = None,
    clock: Callable[[], float] | None = None,
) -> Middleware:
    """Cap model calls: at most ``max_calls`` per caller, or per ``per_seconds`` window.

    The count lives in the middleware, so one caller shared by several loops caps them
    together (the alert-storm case). A call over the cap never reaches the provider: it
    fails with ``status: "rate_limited"`` and a non-retryable ``ProviderError`` of category
    ``rate_limit``, reason ``rate_limit_cap`` (a provider's own 429 has reason
    ``http_429``), carrying ``message``.
    """
    name = "with_rate_limit"
    opts = _opts(
        name,
        options,
        ("max_calls", "per_seconds", "message"),
        max_calls=max_calls,
        per_seconds=per_seconds,
        message=message,
    )
    if "max_calls" not in opts:
        raise ValueError(f"{name}: max_calls is required")
    cap = _positive(name, "max_calls", opts["max_calls"])
    window = opts.get("per_seconds")
    if window is not None:
        window = float(_positive(name, "per_seconds", window, integer=False))
    text = opts.get("message")
    if text is not None and not isinstance(text, str):
        raise ValueError(f"{name}: message must be a string, got {text!r}")
    now = clock or time.monotonic
    stamps: deque[float] = deque()  # admitted calls (all of them, or the current window's)

    def middleware(inner: LlmCaller) -> LlmCaller:
        async def caller(call: dict[str, Any]) -> dict[str, Any]:
            t = now()
            if window is not None:
                while stamps and t - stamps[0] >= window:
                    stamps.popleft()
            if len(stamps) >= cap:
                scope = f" per {window:g} s" if window is not None else ""
                return _refusal(
                    "rate_limited",
                    ProviderError(
                        text or f"llm call rate limit reached: {cap} calls{scope}",
                        category="rate_limit",
                        reason="rate_limit_cap",
                        kind="RateLimitExceeded",
                        retryable=False,
                    ),
                )
            stamps.append(t)
            return await call_caller(inner, call)

        return caller

    return middleware


# -- dry run ---------------------------------------------------------------------------


def _request_digest(request: Any) -> str:
    """A stable digest of what would have been sent (model, system, messages, tools)."""
    if not isinstance(request, LlmRequest):
        return hashlib.sha256(repr(request).encode()).hexdigest()[:16]
    body = {
        "model": request.model,
        "system": request.system,
        "messages": request.messages,
        "tools": [t.get("name") for t in request.tools],
        "purpose": request.purpose,
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]


def with_dry_run(
    options: dict[str, Any] | None = None,
    *,
    sink: Callable[[dict[str, Any]], Any] | list[dict[str, Any]] | None = None,
    text: str | None = None,
) -> Middleware:
    """Shadow mode: record each call and answer it without sending anything.

    Every call becomes a record ``{dry_run: True, iteration, session_id, attempt, model,
    purpose, messages, tools, digest}`` handed to ``sink`` (a callable, or a list appended
    to). The reply is a deterministic placeholder ``LlmResponse`` (no tool calls, so the
    loop completes) whose ``finish_reason`` is ``"dry_run"``, whose ``raw`` is the record,
    and whose text is ``text`` or ``"[dry run] model call not sent (<digest>)"``.
    """
    name = "with_dry_run"
    opts = _opts(name, options, ("sink", "text"), sink=sink, text=text)
    out = opts.get("sink")
    if out is not None and not (callable(out) or isinstance(out, list)):
        raise ValueError(f"{name}: sink must be a callable or a list, got {out!r}")
    placeholder = opts.get("text")
    if placeholder is not None and not isinstance(placeholder, str):
        raise ValueError(f"{name}: text must be a string, got {placeholder!r}")

    def middleware(inner: LlmCaller) -> LlmCaller:
        del inner  # never called: that is the point of a dry run

        async def caller(call: dict[str, Any]) -> dict[str, Any]:
            request = call.get("request")
            turn = call.get("turn") or {}
            digest = _request_digest(request)
            record: dict[str, Any] = {
                "dry_run": True,
                "iteration": turn.get("iteration"),
                "session_id": turn.get("session_id"),
                "attempt": turn.get("attempt"),
                "model": getattr(request, "model", None),
                "purpose": getattr(request, "purpose", None),
                "messages": len(getattr(request, "messages", None) or []),
                "tools": [t.get("name") for t in getattr(request, "tools", None) or []],
                "digest": digest,
            }
            if isinstance(out, list):
                out.append(record)
            elif out is not None:
                done = out(record)
                if inspect.isawaitable(done):
                    await done
            value = LlmResponse(
                text=placeholder
                if placeholder is not None
                else f"[dry run] model call not sent ({digest})",
                finish_reason="dry_run",
                model=record["model"],
                raw=record,
            )
            return {"ok": True, "value": value, "dry_run": True}

        return caller

    return middleware


# -- circuit breaker -------------------------------------------------------------------

#: Failures that say the provider is unhealthy (a 400 or 401 says the request is wrong).
_TRIPPING = ("server", "connection", "timeout", "rate_limit")


class CircuitBreaker:
    """The state behind :func:`with_circuit_breaker` (``closed``/``open``/``half_open``)."""

    def __init__(self, failure_threshold: int, reset_after_ms: float, clock: Callable[[], float]):
        self.failure_threshold = failure_threshold
        self.reset_after_ms = reset_after_ms
        self.clock = clock
        self.state = "closed"
        self.failures = 0  # consecutive tripping failures
        self.opened_at = 0.0
        self.probing = False

    def admit(self) -> bool:
        """Whether a call may go to the provider now (moves open -> half_open when due)."""
        if self.state == "open":
            if (self.clock() - self.opened_at) * 1000 < self.reset_after_ms:
                return False
            self.state = "half_open"
        if self.state == "half_open":
            if self.probing:
                return False  # one probe at a time; the others fail fast
            self.probing = True
        return True

    def record(self, result: dict[str, Any]) -> None:
        self.probing = False
        err = result.get("error")
        tripping = not result.get("ok") and getattr(err, "category", "server") in _TRIPPING
        if not tripping:
            if result.get("ok") or self.state == "half_open":
                self.state, self.failures = "closed", 0
            return
        self.failures += 1
        if self.state == "half_open" or self.failures >= self.failure_threshold:
            self.state, self.opened_at = "open", self.clock()


def with_circuit_breaker(
    options: dict[str, Any] | None = None,
    *,
    failure_threshold: int | None = None,
    reset_after_ms: float | None = None,
    clock: Callable[[], float] | None = None,
) -> Middleware:
    """Stop calling a failing provider: fail fast while open, probe once when due.

    ``failure_threshold`` (default 5) consecutive provider failures of category
    ``server``, ``connection``, ``timeout`` or ``rate_limit`` open the circuit. While open,
    calls fail without reaching the provider (``status: "circuit_open"``, a non-retryable
    ``ProviderError`` of category ``circuit_open``). ``reset_after_ms`` (default 30000)
    after opening, the next call is a half-open probe: success closes the circuit, a
    failure re-opens it for another ``reset_after_ms``. The state is shared by every loop
    using the same caller; ``caller.breaker`` exposes it.
    """
    name = "with_circuit_breaker"
    opts = _opts(
        name,
        options,
        ("failure_threshold", "reset_after_ms"),
        failure_threshold=failure_threshold,
        reset_after_ms=reset_after_ms,
    )
    threshold = _positive(name, "failure_threshold", opts.get("failure_threshold", 5))
    reset = float(
        _positive(name, "reset_after_ms", opts.get("reset_after_ms", 30000), integer=False)
    )

    def middleware(inner: LlmCaller) -> LlmCaller:
        breaker = CircuitBreaker(threshold, reset, clock or time.monotonic)

        async def caller(call: dict[str, Any]) -> dict[str, Any]:
            if not breaker.admit():
                waited = (breaker.clock() - breaker.opened_at) * 1000
                return _refusal(
                    "circuit_open",
                    ProviderError(
                        f"circuit open after {breaker.failures} consecutive provider failures; "
                        f"next probe in {max(0.0, reset - waited):.0f} ms",
                        category="circuit_open",
                        reason="circuit_open",
                        kind="CircuitOpen",
                        retryable=False,
                    ),
                )
            try:
                result = await call_caller(inner, call)
            except Exception:
                breaker.record({"ok": False})
                raise
            except BaseException:  # cancelled: no verdict on the provider, free the probe
                breaker.probing = False
                raise
            breaker.record(result)
            return result

        caller.breaker = breaker  # type: ignore[attr-defined]
        return caller

    return middleware


# -- cheap / frontier escalation -------------------------------------------------------

Tier = LlmCaller | Provider | dict[str, Any]


def _tier_caller(name: str, field: str, tier: Tier) -> LlmCaller:
    """A caller from a caller, a provider, or ``{"model": ..., "provider"?: ...}``."""
    if isinstance(tier, Provider):
        return default_llm_caller(tier)
    if isinstance(tier, dict):
        unknown = sorted(set(tier) - {"model", "provider"})
        if unknown or ("model" not in tier and "provider" not in tier):
            raise ValueError(
                f"{name}: {field} must be a caller, a provider or {{model, provider?}}"
            )
        model = tier.get("model")
        target = tier.get("provider")
        if target is not None and not isinstance(target, Provider):
            raise ValueError(f"{name}: {field}.provider must be a Provider")
        base = default_llm_caller(target)

        async def caller(call: dict[str, Any]) -> dict[str, Any]:
            request = call.get("request")
            if model is not None and isinstance(request, LlmRequest):
                call = {**call, "request": dataclasses.replace(request, model=model)}
            return await call_caller(base, call)

        return caller
    if callable(tier):
        return tier
    raise ValueError(f"{name}: {field} must be a caller, a provider or {{model, provider?}}")


def with_escalation(
    cheap: Tier,
    frontier: Tier,
    escalate_predicate: Callable[[dict[str, Any]], Any] | None = None,
    *,
    accept: Callable[[dict[str, Any], dict[str, Any]], Any] | None = None,
) -> LlmCaller:
    """Cheap by default, frontier when it matters: a caller routing each call to one tier.

    ``cheap`` / ``frontier``: a caller, a :class:`Provider`, or ``{"model": ...,
    "provider"?: ...}`` (the loop's provider with another model). A call goes to
    ``frontier`` when ``escalate_predicate(call)`` is true (e.g. ``lambda c:
    c["request"].purpose == "judge"``), otherwise to ``cheap``; a cheap result that
    ``accept(call, result)`` rejects (default: a failed call) is escalated to
    ``frontier``. The reply carries ``tier: "cheap" | "frontier"`` and ``escalated``.
    """
    name = "with_escalation"
    cheap_caller = _tier_caller(name, "cheap", cheap)
    frontier_caller = _tier_caller(name, "frontier", frontier)
    if escalate_predicate is not None and not callable(escalate_predicate):
        raise TypeError(f"{name}: escalate_predicate must be callable")
    if accept is not None and not callable(accept):
        raise TypeError(f"{name}: accept must be callable")

    async def ask(fn: Callable[..., Any], *args: Any) -> bool:
        value = fn(*args)
        if inspect.isawaitable(value):
            value = await value
        return bool(value)

    async def caller(call: dict[str, Any]) -> dict[str, Any]:
        if escalate_predicate is not None and await ask(escalate_predicate, call):
            result = await call_caller(frontier_caller, call)
            return {**result, "tier": "frontier", "escalated": False}
        result = await call_caller(cheap_caller, call)
        good = await ask(accept, call, result) if accept is not None else bool(result["ok"])
        if good:
            return {**result, "tier": "cheap", "escalated": False}
        result = await call_caller(frontier_caller, call)
        return {**result, "tier": "frontier", "escalated": True}

    return caller
