"""Model-call retries that respect the server: ``Retry-After`` and jittered back-off.

A failed attempt is retried when its error is a retryable
:class:`~charter.agent.providers.ProviderError` (429, 5xx, connection, timeout). The wait
before the next attempt is the back-off (``exponential``: ``base * 2**n`` plus up to
``base`` of random jitter, so clients that failed together do not retry together;
``fixed``; ``none``) or, when longer, what the server asked for in ``Retry-After`` /
``retry-after-ms`` (carried on the error as ``retry_after``). A server asking for more
than :data:`MAX_RETRY_AFTER_S` ends the retries at once: the error goes back to the
caller with its ``retry_after`` rather than the loop sleeping for minutes.

The retry loop is tenacity's (a kept library: its wait strategies, stop conditions and
async sleep); it is built only after a first failure, so a call that succeeds pays
nothing for it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .providers.base import ProviderError

MAX_RETRY_AFTER_S = 60.0
Reply = dict[str, Any]


def should_retry(reply: Reply) -> bool:
    """Whether ``reply`` failed with a retryable provider error."""
    err = reply.get("error")
    return not reply.get("ok") and isinstance(err, ProviderError) and err.retryable


def _hint(reply: Reply) -> float | None:
    err = reply.get("error")
    value = getattr(err, "retry_after", None)
    return float(value) if isinstance(value, (int, float)) else None


async def retry_replies(
    first: Reply,
    again: Callable[[int], Awaitable[Reply]],
    *,
    attempts: int,
    base_ms: int,
    mode: str = "exponential",
    sleep: Callable[[float], Awaitable[None]],
) -> Reply:
    """Given attempt 1's reply ``first``, make attempts 2..``attempts`` with ``again(n)``
    while the reply is retryable; the last reply is returned (never raised)."""
    if attempts <= 1 or not should_retry(first):
        return first
    import tenacity

    base_s = base_ms / 1000
    if mode == "none":
        backoff: Any = tenacity.wait_none()
    elif mode == "fixed":
        backoff = tenacity.wait_fixed(base_s)
    else:
        backoff = tenacity.wait_exponential_jitter(multiplier=base_s, jitter=base_s, max=120)

    def wait(state: tenacity.RetryCallState) -> float:
        delay = float(backoff(state))
        hint = _hint(state.outcome.result()) if state.outcome is not None else None
        return max(delay, hint) if hint is not None else delay

    class server_says_too_long(tenacity.stop.stop_base):
        def __call__(self, state: tenacity.RetryCallState) -> bool:
            hint = _hint(state.outcome.result()) if state.outcome is not None else None
            return hint is not None and hint > MAX_RETRY_AFTER_S

    replayed = [first]
    number = 0

    async def attempt() -> Reply:
        nonlocal number
        number += 1
        if replayed:  # attempt 1 already happened: tenacity sees its reply first
            return replayed.pop()
        return await again(number)

    retrying = tenacity.AsyncRetrying(
        stop=tenacity.stop_after_attempt(attempts) | server_says_too_long(),
        wait=wait,
        retry=tenacity.retry_if_result(should_retry),
        sleep=sleep,
        retry_error_callback=lambda state: state.outcome.result() if state.outcome else first,
    )
    result: Reply = await retrying(attempt)
    return result


def parse_retry_after(headers: Any, now: float | None = None) -> float | None:
    """Seconds from ``retry-after-ms`` (OpenAI) or ``Retry-After`` (seconds or an HTTP
    date), ``None`` when absent or unreadable."""
    if headers is None:
        return None
    try:
        millis = headers.get("retry-after-ms")
        if millis is not None:
            return max(0.0, float(millis) / 1000)
        value = headers.get("retry-after")
    except (AttributeError, TypeError, ValueError):
        return None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    import time
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(str(value)).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))
