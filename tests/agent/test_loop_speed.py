"""Speed work on the loop keeps behaviour: sync twins, audit events (issue 12)."""

from __future__ import annotations

import asyncio
import random
import signal
import threading
from typing import Any

import pytest

from charter.agent import (
    LlmRequest,
    LlmResponse,
    MockProvider,
    agent_loop,
    default_llm_caller,
    with_retry,
)
from charter.agent.sync import run_sync


class _Recorder:
    """A result whose ``repr`` is noticed (an agent result's repr is its whole transcript)."""

    def __init__(self) -> None:
        self.reprs = 0

    def __repr__(self) -> str:
        self.reprs += 1
        return "<recorder>"


async def _make(value: _Recorder) -> _Recorder:
    return value


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread()
    or signal.getsignal(signal.SIGINT) is not signal.default_int_handler,
    reason="asyncio installs its SIGINT handler only in the main thread, over the default",
)
def test_result_is_not_formatted() -> None:
    plain = _Recorder()
    assert asyncio.run(_make(plain)) is plain
    assert plain.reprs > 0  # what run_sync avoids: asyncio formats the task's result

    boxed = _Recorder()
    assert run_sync(_make(boxed)) is boxed
    assert boxed.reprs == 0


def test_exceptions_propagate() -> None:
    async def fail() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        run_sync(fail())


def test_audit_event_is_the_outcome_dict() -> None:
    """The loop builds ``tool_call_audit`` events in one dict; same keys, same order."""
    from charter.agent.dispatch import ToolOutcome

    for audit in ({}, {"bytes": 3}):
        outcome = ToolOutcome(
            "c1", "read", {"path": "a"}, "ok", "x", "x", None, {"decision": "allow"}, 1, 0.5, audit
        )
        expected = {"type": "tool_call_audit", "iteration": 7, **outcome.to_dict()}
        event = outcome.audit_event(7)
        assert event == expected
        assert list(event) == list(expected)
    denied = ToolOutcome("c2", "bash", {}, "permission_denied", {}, "{}", "no")
    assert denied.audit_event(1) == {"type": "tool_call_audit", "iteration": 1, **denied.to_dict()}


class _Raising(MockProvider):
    """A provider whose scripted ``"raise"`` turn raises a plain exception."""

    async def complete(self, request: LlmRequest) -> LlmResponse:
        if self.turns[self._index] == "raise":
            self._index += 1
            raise RuntimeError("socket closed")
        return await super().complete(request)


def _err(category: str, retryable: bool | None = None) -> dict[str, Any]:
    return {"error": {"category": category, "message": category, "retryable": retryable}}


@pytest.mark.parametrize(
    ("script", "retries"),
    [
        ([_err("server"), _err("server"), "ok"], 2),
        ([_err("server"), _err("server"), _err("server"), "ok"], 2),
        ([_err("server"), _err("server"), _err("server"), "ok"], 3),
        ([_err("server"), "ok"], 0),
        ([_err("rate_limit", retryable=False), "ok"], 3),
        (["raise", "ok"], 2),
        ([_err("server"), "raise", "ok"], 2),
    ],
)
def test_model_calls_without_llm_caller_match_the_caller_chain(
    script: list[Any], retries: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without an ``llm_caller`` the loop calls the provider directly; it must reply, retry
    and back off exactly as ``with_retry(default_llm_caller(provider))`` does."""
    chain_sleeps: list[float] = []
    direct_sleeps: list[float] = []

    async def record_chain(seconds: float) -> None:
        chain_sleeps.append(seconds)

    async def record_direct(seconds: float) -> None:
        direct_sleeps.append(seconds)

    random.seed(7)  # the same jitter on both paths
    chained = _Raising(list(script))
    caller = with_retry(max_attempts=retries + 1, base_ms=7, sleep=record_chain)(
        default_llm_caller(chained)
    )
    via_chain = agent_loop("x", provider=chained, llm_caller=caller, session_id="s")

    monkeypatch.setattr(asyncio, "sleep", record_direct)
    random.seed(7)
    direct = _Raising(list(script))
    via_direct = agent_loop(
        "x", provider=direct, llm_retries=retries, llm_backoff_ms=7, session_id="s"
    )
    monkeypatch.undo()

    assert via_direct.status == via_chain.status
    assert via_direct.error == via_chain.error
    assert via_direct.visible_text == via_chain.visible_text
    assert len(direct.requests) == len(chained.requests)
    assert direct_sleeps == chain_sleeps
