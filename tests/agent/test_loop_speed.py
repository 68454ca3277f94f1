"""Speed work on the loop keeps behaviour: sync twins, audit events (issue 12)."""

from __future__ import annotations

import asyncio
import signal
import threading

import pytest

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
