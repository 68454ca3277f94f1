"""Model-call retries respect the server: ``Retry-After`` / ``retry-after-ms`` from the
SDK error's headers set the least wait; back-off is jittered; a server asking for too
long ends the retries with the hint on the error."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from charter.agent import ProviderError, agent_loop, default_llm_caller, with_retry
from charter.agent.retrying import parse_retry_after

from .fakeserver import fake_server
from .replies import chat, provider_for

pytest.importorskip("openai")


def _limited(headers: dict[str, str]) -> dict[str, Any]:
    body = {"error": {"message": "slow down", "type": "rate_limit_error", "code": None}}
    return {"status": 429, "json": body, "headers": headers}


def test_the_direct_path_waits_what_the_server_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", record)
    with fake_server([_limited({"retry-after": "3"}), chat("ok")]) as srv:
        result = agent_loop(
            "x", provider=provider_for("openai", srv.url), llm_retries=2, llm_backoff_ms=10
        )
    monkeypatch.undo()
    assert result.status == "done" and len(srv.requests) == 2
    assert slept == [3.0]  # the server's 3 s, not the 10-20 ms back-off


def test_with_retry_reads_retry_after_ms() -> None:
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    with fake_server([_limited({"retry-after-ms": "1500"}), chat("ok")]) as srv:
        caller = with_retry(max_attempts=3, base_ms=10, sleep=record)(
            default_llm_caller(provider_for("openai", srv.url))
        )
        result = agent_loop("x", llm_caller=caller, provider=provider_for("openai", srv.url))
    assert result.status == "done" and slept == [1.5]


def test_a_server_asking_for_minutes_ends_the_retries() -> None:
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    with fake_server([_limited({"retry-after": "600"}), chat("never")]) as srv:
        provider = provider_for("openai", srv.url)
        caller = with_retry(max_attempts=3, base_ms=10, sleep=record)(default_llm_caller(provider))
        reply = asyncio.run(caller({"request": _request(), "provider": provider, "turn": {}}))
    assert not reply["ok"] and slept == [] and len(srv.requests) == 1
    err = reply["error"]
    assert isinstance(err, ProviderError) and err.retry_after == 600.0
    assert err.to_dict()["retry_after"] == 600.0


def test_backoff_without_a_hint_is_jittered() -> None:
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    five_hundreds = [{"status": 503, "json": {"error": {"message": "busy"}}}] * 4
    with fake_server(five_hundreds) as srv:
        provider = provider_for("openai", srv.url)
        caller = with_retry(max_attempts=4, base_ms=100, sleep=record)(default_llm_caller(provider))
        asyncio.run(caller({"request": _request(), "provider": provider, "turn": {}}))
    assert len(slept) == 3
    for n, delay in enumerate(slept):  # base * 2**n plus up to base of jitter
        assert 0.1 * 2**n <= delay <= 0.1 * 2**n + 0.1
    assert len(set(slept)) == 3


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    when = "Wed, 21 Oct 2015 07:28:00 GMT"
    assert parse_retry_after({"retry-after": when}, now=1445412470.0) == 10.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None and parse_retry_after(None) is None


def _request() -> Any:
    from charter.agent import LlmRequest

    return LlmRequest("m", None, [{"role": "user", "content": "x"}])
