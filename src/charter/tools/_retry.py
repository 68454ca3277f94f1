"""Retries with backoff and jitter (``stamina``), honouring the provider's own wait.

A :class:`Retryable` carries the wait the provider asked for (``Retry-After``,
``x-ratelimit-reset``); stamina sleeps that long plus jitter, or its own exponential
backoff when the provider said nothing (a 5xx, a dropped connection).
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import stamina

T = TypeVar("T")


class Retryable(Exception):
    """Raised inside an attempt that may be retried; ``wait`` is the provider's ask."""

    def __init__(self, error: Exception, wait: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.wait = wait


@dataclass(frozen=True)
class RetryPolicy:
    """``attempts`` in all; a provider's wait above ``max_wait`` is not waited for (the
    call fails with the rate-limit error instead of holding a run for an hour)."""

    attempts: int = 4
    timeout: float = 120.0
    wait_initial: float = 0.5
    wait_max: float = 8.0
    jitter: float = 0.5
    max_wait: float = 60.0

    def backoff(self, exc: Exception) -> bool | float | dt.timedelta:
        if not isinstance(exc, Retryable):
            return False
        if exc.wait is None:
            return True  # stamina's exponential backoff with jitter
        if exc.wait > self.max_wait:
            return False
        return exc.wait + random.uniform(0, self.jitter)


async def call_with_retries(policy: RetryPolicy, attempt: Callable[[], Awaitable[T]]) -> T:
    """Run ``attempt`` until it returns, raises a non-:class:`Retryable`, or the policy
    gives up; then the last :class:`Retryable`'s own error is raised."""
    try:
        async for retry in stamina.retry_context(
            on=policy.backoff,
            attempts=policy.attempts,
            timeout=policy.timeout,
            wait_initial=policy.wait_initial,
            wait_max=policy.wait_max,
            wait_jitter=policy.jitter,
        ):
            with retry:
                return await attempt()
    except Retryable as exc:
        raise exc.error from None
    raise AssertionError("stamina.retry_context ended without an attempt")  # pragma: no cover


def call_with_retries_sync(policy: RetryPolicy, attempt: Callable[[], T]) -> T:
    """The synchronous twin of :func:`call_with_retries` (the Slack and PagerDuty SDKs)."""
    try:
        for retry in stamina.retry_context(
            on=policy.backoff,
            attempts=policy.attempts,
            timeout=policy.timeout,
            wait_initial=policy.wait_initial,
            wait_max=policy.wait_max,
            wait_jitter=policy.jitter,
        ):
            with retry:
                return attempt()
    except Retryable as exc:
        raise exc.error from None
    raise AssertionError("stamina.retry_context ended without an attempt")  # pragma: no cover
