"""LLM caller middleware through ``agent_loop``: rate limit, dry run, circuit breaker,
cheap/frontier escalation, and their composition. Each test checks what the provider
actually received (the mock's ``requests`` or the fake OpenAI server's)."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from charter.agent import (
    MockProvider,
    agent_loop,
    compose,
    default_llm_caller,
    get_provider,
    with_circuit_breaker,
    with_dry_run,
    with_escalation,
    with_rate_limit,
    with_retry,
)

from .conftest import Recorder, tc
from .fakeserver import fake_server


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def chat(content: str | None = None, call: tuple[str, str, str] | None = None) -> dict[str, Any]:
    """A Chat Completions reply (one tool call or text)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if call:
        message["tool_calls"] = [
            {"id": call[0], "type": "function", "function": {"name": call[1], "arguments": call[2]}}
        ]
    return {
        "json": {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop"}
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        }
    }


def server_error() -> dict[str, Any]:
    return {"status": 500, "json": {"error": {"message": "upstream down", "type": "server"}}}


def openai(url: str) -> Any:
    return get_provider("openai", base_url=url + "/v1", api_key="k")


# -- with_rate_limit ---------------------------------------------------------------------


def test_rate_limit_fails_the_turn_over_the_cap_without_calling_the_provider(
    rec: Recorder,
) -> None:
    provider = MockProvider([tc("look"), tc("look"), "done"])
    caller = with_rate_limit({"max_calls": 2, "message": "alert-loop cap"})(
        default_llm_caller(provider)
    )
    result = agent_loop("x", provider=provider, tools=[rec.tool("look")], llm_caller=caller)
    assert result.status == "provider_error"
    assert result.error is not None
    assert (result.error["category"], result.error["reason"]) == ("rate_limit", "rate_limit_cap")
    assert result.error["message"] == "alert-loop cap"
    assert len(provider.requests) == 2 and rec.names() == ["look", "look"]


def test_rate_limit_under_the_cap_is_transparent(rec: Recorder) -> None:
    provider = MockProvider([tc("look"), tc("look"), "done"])
    caller = with_rate_limit(max_calls=3)(default_llm_caller(provider))
    result = agent_loop("x", provider=provider, tools=[rec.tool("look")], llm_caller=caller)
    assert result.status == "done" and result.visible_text == "done"
    assert len(provider.requests) == 3


def test_rate_limit_is_shared_by_loops_using_one_caller_and_windows_slide() -> None:
    provider = MockProvider(["a", "b", "c"])
    clock = Clock()
    caller = with_rate_limit({"max_calls": 1, "per_seconds": 10}, clock=clock)(
        default_llm_caller(provider)
    )
    assert agent_loop("x", provider=provider, llm_caller=caller).visible_text == "a"
    clock.now += 9.9
    second = agent_loop("x", provider=provider, llm_caller=caller)
    assert second.status == "provider_error" and len(provider.requests) == 1
    assert second.error is not None and "1 calls per 10 s" in second.error["message"]
    clock.now += 0.1  # the first call left the window
    assert agent_loop("x", provider=provider, llm_caller=caller).visible_text == "b"
    assert len(provider.requests) == 2


def test_rate_limit_against_a_real_http_server(rec: Recorder) -> None:
    with fake_server([chat(None, ("c1", "look", "{}")), chat("never sent")]) as srv:
        provider = openai(srv.url)
        caller = with_rate_limit({"max_calls": 1})(default_llm_caller(provider))
        result = agent_loop(
            "x", provider=provider, model="m", tools=[rec.tool("look")], llm_caller=caller
        )
    assert result.status == "provider_error" and len(srv.requests) == 1
    assert rec.names() == ["look"]


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"max_calls": 0}, "max_calls"),
        ({"max_calls": True}, "max_calls"),
        ({}, "max_calls"),
        ({"max_calls": 2, "per_seconds": -1}, "per_seconds"),
        ({"max_calls": 2, "per_second": 1}, "per_second"),
        ({"max_calls": 2, "message": 5}, "message"),
    ],
)
def test_rate_limit_bad_options_name_the_field(options: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=f"with_rate_limit: .*{field}"):
        with_rate_limit(options)


# -- with_dry_run ------------------------------------------------------------------------


def test_dry_run_records_and_never_sends() -> None:
    records: list[dict[str, Any]] = []
    with fake_server([]) as srv:
        provider = openai(srv.url)
        caller = with_dry_run({"sink": records})(default_llm_caller(provider))
        first = agent_loop("ship it", "sys", provider=provider, model="m", llm_caller=caller)
        again = agent_loop("ship it", "sys", provider=provider, model="m", llm_caller=caller)
    assert srv.requests == []
    assert first.status == "done" and first.visible_text.startswith("[dry run] model call not")
    assert first.visible_text == again.visible_text  # deterministic placeholder
    assert len(records) == 2 and records[0]["dry_run"] is True
    assert records[0]["digest"] == records[1]["digest"] and records[0]["model"] == "m"
    assert records[0]["iteration"] == 1 and records[0]["session_id"]


def test_without_dry_run_the_same_loop_reaches_the_server() -> None:
    with fake_server([chat("sent")]) as srv:
        provider = openai(srv.url)
        result = agent_loop("ship it", provider=provider, model="m")
    assert result.visible_text == "sent" and len(srv.requests) == 1


def test_dry_run_placeholder_text_and_callable_sink() -> None:
    seen: list[dict[str, Any]] = []

    async def sink(record: dict[str, Any]) -> None:
        seen.append(record)

    provider = MockProvider(["real"])
    caller = with_dry_run(sink=sink, text="(shadow)")(default_llm_caller(provider))
    result = agent_loop("x", provider=provider, llm_caller=caller)
    assert result.visible_text == "(shadow)" and provider.requests == []
    assert seen and seen[0]["purpose"] == "turn"
    with pytest.raises(ValueError, match="with_dry_run: sink"):
        with_dry_run({"sink": "records.jsonl"})


# -- with_circuit_breaker ----------------------------------------------------------------


def test_circuit_opens_fails_fast_then_probes_and_closes() -> None:
    down = {"error": {"category": "server", "message": "down"}}
    provider = MockProvider([down, down, "recovered", "still fine"])
    clock = Clock()
    caller = with_circuit_breaker({"failure_threshold": 2, "reset_after_ms": 1000}, clock=clock)(
        default_llm_caller(provider)
    )
    for _ in range(2):
        assert agent_loop("x", provider=provider, llm_caller=caller).status == "provider_error"
    assert len(provider.requests) == 2
    fast = agent_loop("x", provider=provider, llm_caller=caller)
    assert fast.error is not None and fast.error["category"] == "circuit_open"
    assert len(provider.requests) == 2  # open: the provider was not called
    clock.now += 0.999
    agent_loop("x", provider=provider, llm_caller=caller)
    assert len(provider.requests) == 2
    clock.now += 0.001  # reset_after_ms elapsed: one half-open probe goes through
    assert agent_loop("x", provider=provider, llm_caller=caller).visible_text == "recovered"
    assert agent_loop("x", provider=provider, llm_caller=caller).visible_text == "still fine"
    assert len(provider.requests) == 4 and caller.breaker.state == "closed"  # type: ignore[attr-defined]


def test_failed_probe_reopens_the_circuit() -> None:
    down = {"error": {"category": "connection", "message": "refused"}}
    provider = MockProvider([down, down, "never"])
    clock = Clock()
    caller = with_circuit_breaker(failure_threshold=1, reset_after_ms=500, clock=clock)(
        default_llm_caller(provider)
    )
    agent_loop("x", provider=provider, llm_caller=caller)
    clock.now += 0.5
    probe = agent_loop("x", provider=provider, llm_caller=caller)
    assert probe.error is not None and probe.error["category"] == "connection"
    assert len(provider.requests) == 2
    again = agent_loop("x", provider=provider, llm_caller=caller)
    assert again.error is not None and again.error["category"] == "circuit_open"
    assert len(provider.requests) == 2


def test_client_errors_do_not_trip_the_breaker() -> None:
    bad = {"error": {"category": "client", "message": "bad request"}}
    provider = MockProvider([bad, bad, bad, "ok"])
    caller = with_circuit_breaker({"failure_threshold": 2})(default_llm_caller(provider))
    for _ in range(3):
        result = agent_loop("x", provider=provider, llm_caller=caller)
        assert result.error is not None and result.error["category"] == "client"
    assert agent_loop("x", provider=provider, llm_caller=caller).visible_text == "ok"
    assert len(provider.requests) == 4


def test_breaker_inside_retry_stops_the_retries_against_a_real_server() -> None:
    with fake_server([server_error()] * 5) as srv:
        provider = openai(srv.url)
        caller = compose(
            [
                with_retry(max_attempts=5, backoff="none"),
                with_circuit_breaker({"failure_threshold": 2, "reset_after_ms": 60000}),
            ]
        )(default_llm_caller(provider))
        result = agent_loop("x", provider=provider, model="m", llm_caller=caller)
    assert result.error is not None and result.error["category"] == "circuit_open"
    assert len(srv.requests) == 2


def test_circuit_breaker_bad_options_name_the_field() -> None:
    with pytest.raises(ValueError, match="failure_threshold"):
        with_circuit_breaker({"failure_threshold": 0})
    with pytest.raises(ValueError, match="reset_after_ms"):
        with_circuit_breaker(reset_after_ms=-5)
    with pytest.raises(ValueError, match="threshold"):
        with_circuit_breaker({"threshold": 3})


# -- with_escalation ---------------------------------------------------------------------


def test_escalation_routes_by_predicate_to_the_frontier_model(rec: Recorder) -> None:
    with fake_server([chat(None, ("c1", "look", "{}")), chat("final")]) as srv:
        provider = openai(srv.url)
        caller = with_escalation(
            {"model": "cheap-m"},
            {"model": "frontier-m"},
            lambda call: call["turn"]["iteration"] >= 2,
        )
        result = agent_loop(
            "x", provider=provider, model="m", tools=[rec.tool("look")], llm_caller=caller
        )
    assert result.visible_text == "final"
    assert [r["json"]["model"] for r in srv.requests] == ["cheap-m", "frontier-m"]


def test_cheap_failure_escalates_and_success_does_not() -> None:
    cheap = MockProvider([{"error": {"category": "client", "message": "context too long"}}, "c"])
    frontier = MockProvider(["from frontier"])
    caller = with_escalation(cheap, frontier)
    first = agent_loop("x", provider=cheap, llm_caller=caller)
    assert first.visible_text == "from frontier" and len(frontier.requests) == 1
    second = agent_loop("x", provider=cheap, llm_caller=caller)
    assert second.visible_text == "c" and len(frontier.requests) == 1
    assert len(cheap.requests) == 2


def test_escalation_accept_check_rejects_a_weak_cheap_answer() -> None:
    cheap = MockProvider(["idk"])
    frontier = MockProvider(["a real answer"])

    def accept(call: dict[str, Any], result: dict[str, Any]) -> bool:
        return bool(result["ok"]) and len(result["value"].text) > 3

    caller = with_escalation(default_llm_caller(cheap), frontier, accept=accept)
    result = agent_loop("x", provider=cheap, llm_caller=caller)
    assert result.visible_text == "a real answer"
    assert len(cheap.requests) == 1 and len(frontier.requests) == 1


def test_escalation_bad_tier_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="with_escalation: frontier"):
        with_escalation({"model": "a"}, {"modle": "b"})
    with pytest.raises(TypeError, match="escalate_predicate"):
        with_escalation({"model": "a"}, {"model": "b"}, "judge")  # type: ignore[arg-type]


# -- composition and the deprecated llm_retries ------------------------------------------


def test_composed_stack_works_as_llm_caller(rec: Recorder) -> None:
    provider = MockProvider(
        [{"error": {"category": "server", "message": "blip"}}, tc("look"), "done"]
    )
    caller = compose(
        [
            with_retry(max_attempts=2, backoff="none"),
            with_circuit_breaker({"failure_threshold": 3}),
            with_rate_limit({"max_calls": 3}),
        ]
    )(default_llm_caller(provider))
    result = agent_loop("x", provider=provider, tools=[rec.tool("look")], llm_caller=caller)
    assert result.status == "done" and len(provider.requests) == 3
    assert rec.names() == ["look"]


def test_llm_retries_next_to_llm_caller_warns_and_retries_against_a_real_server() -> None:
    with fake_server([server_error(), chat("second try")]) as srv:
        provider = openai(srv.url)
        with pytest.warns(DeprecationWarning, match="llm_retries"):
            result = agent_loop(
                "x",
                provider=provider,
                model="m",
                llm_caller=default_llm_caller(provider),
                llm_retries=1,
                llm_backoff_ms=0,
            )
    assert result.visible_text == "second try" and len(srv.requests) == 2
    with fake_server([server_error(), chat("unused")]) as srv:
        provider = openai(srv.url)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            result = agent_loop(
                "x", provider=provider, model="m", llm_caller=default_llm_caller(provider)
            )
    assert result.status == "provider_error" and len(srv.requests) == 1
