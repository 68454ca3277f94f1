"""Reasoning and thinking options lowered to each provider's real request parameters,
checked on the HTTP bodies and headers a protocol-faithful fake server received."""

from __future__ import annotations

from typing import Any

import pytest

from charter.agent import AgentOptionError, MockProvider, agent_loop, get_provider
from charter.agent.reasoning import REASONING_KEYS

from .conftest import Recorder
from .fakeserver import fake_server

pytest.importorskip("openai")
pytest.importorskip("anthropic")


def chat(content: str | None = "ok", call: tuple[str, str] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if call:
        message["tool_calls"] = [
            {"id": call[0], "type": "function", "function": {"name": call[1], "arguments": "{}"}}
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


def claude(content: list[dict[str, Any]], stop: str = "end_turn") -> dict[str, Any]:
    return {
        "json": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 6},
        }
    }


def openai_body(model: str, replies: list[Any] | None = None, **options: Any) -> dict[str, Any]:
    """Run one loop against a fake Chat Completions server; the first request body."""
    with fake_server(replies or [chat()]) as srv:
        provider = get_provider("openai", base_url=srv.url + "/v1", api_key="k")
        result = agent_loop("x", "sys", provider=provider, model=model, **options)
    assert result.status == "done", result.error
    body: dict[str, Any] = srv.requests[0]["json"]
    assert not set(body) & set(REASONING_KEYS) - {"reasoning_effort"}, "a neutral key leaked"
    return body


def anthropic_request(model: str, replies: list[Any] | None = None, **options: Any) -> Any:
    with fake_server(replies or [claude([{"type": "text", "text": "ok"}])]) as srv:
        provider = get_provider("anthropic", base_url=srv.url, api_key="k")
        result = agent_loop("x", provider=provider, model=model, **options)
    return result, srv.requests


def beta(request: dict[str, Any]) -> str | None:
    headers = {k.lower(): v for k, v in request["headers"].items()}
    return headers.get("anthropic-beta")


# -- OpenAI ------------------------------------------------------------------------------


def test_auto_policy_sets_effort_only_on_reasoning_models() -> None:
    assert openai_body("gpt-5")["reasoning_effort"] == "low"  # a chat turn, medium scale
    assert "reasoning_effort" not in openai_body("gpt-4.1")
    assert "reasoning_effort" not in openai_body("gpt-5-chat-latest")


@pytest.mark.parametrize(
    ("options", "effort"),
    [
        ({"reasoning_scale": "large"}, "medium"),
        ({"problem_scale": "small"}, "minimal"),
        ({"reasoning_task": "code"}, "medium"),
        ({"reasoning_task": "code", "reasoning_scale": "large"}, "high"),
        ({"reasoning_task": "summarize", "reasoning_scale": "small"}, "minimal"),
    ],
)
def test_auto_policy_follows_task_and_scale(options: dict[str, Any], effort: str) -> None:
    assert openai_body("gpt-5", **options)["reasoning_effort"] == effort


def test_auto_policy_infers_the_agent_task_from_tools(rec: Recorder) -> None:
    body = openai_body("gpt-5", [chat(None, ("c1", "look")), chat()], tools=[rec.tool("look")])
    assert body["reasoning_effort"] == "medium"


@pytest.mark.parametrize(
    ("model", "policy", "effort"),
    [
        ("gpt-5.1", "off", "none"),
        ("gpt-5", "off", "minimal"),
        ("o3", "off", "low"),
        ("gpt-5", "xhigh", "high"),  # clamped to what the model accepts
        ("gpt-5.2", "xhigh", "xhigh"),
        ("o4-mini", "minimal", "low"),
        ("gpt-5-mini", "high", "high"),
    ],
)
def test_explicit_policy_levels_fit_the_model(model: str, policy: str, effort: str) -> None:
    assert openai_body(model, reasoning_policy=policy)["reasoning_effort"] == effort


def test_policy_off_on_a_model_that_does_not_reason_sends_nothing() -> None:
    assert "reasoning_effort" not in openai_body("gpt-4.1", thinking_policy=False)


def test_caller_effort_wins_over_policy_and_is_never_clamped() -> None:
    assert (
        openai_body("gpt-5", reasoning_policy="low", reasoning_effort="high")["reasoning_effort"]
        == "high"
    )
    assert openai_body("gpt-5", reasoning_effort="xhigh")["reasoning_effort"] == "xhigh"
    assert openai_body("gpt-4.1", thinking=True)["reasoning_effort"] == "medium"
    body = openai_body("gpt-5", llm_options={"reasoning_effort": "minimal"})
    assert body["reasoning_effort"] == "minimal"
    # an Anthropic-shaped thinking dict is translated, not sent to OpenAI as is
    body = openai_body("o3", thinking={"type": "enabled", "budget_tokens": 16384})
    assert body["reasoning_effort"] == "high" and "thinking" not in body


def test_adaptive_thinking_leaves_the_effort_to_the_model() -> None:
    assert "reasoning_effort" not in openai_body("gpt-5", thinking={"mode": "adaptive"})


def test_max_tokens_becomes_max_completion_tokens_on_reasoning_models() -> None:
    body = openai_body("gpt-5", max_tokens=300)
    assert body["max_completion_tokens"] == 300 and "max_tokens" not in body
    assert openai_body("gpt-4.1", max_tokens=300)["max_tokens"] == 300


def test_responses_api_gets_reasoning_and_every_llm_option() -> None:
    reply = {
        "json": {
            "id": "resp_1",
            "object": "response",
            "created_at": 1,
            "model": "gpt-5",
            "status": "completed",
            "output": [
                {
                    "type": "message",
                    "id": "m1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "ok", "annotations": []}],
                }
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": 3,
                "output_tokens": 1,
                "total_tokens": 4,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
    }
    with fake_server([reply]) as srv:
        provider = get_provider("openai-responses", base_url=srv.url + "/v1", api_key="k")
        result = agent_loop(
            "x",
            provider=provider,
            model="gpt-5",
            reasoning_effort="high",
            max_tokens=500,
            llm_options={"top_p": 0.5, "seed": 7},
        )
    assert result.visible_text == "ok"
    body = srv.requests[0]["json"]
    assert srv.requests[0]["path"] == "/v1/responses"
    assert body["reasoning"] == {"effort": "high"}
    assert (body["top_p"], body["seed"], body["max_output_tokens"]) == (0.5, 7, 500)


def test_local_qwen_routes_use_the_soft_switch() -> None:
    def system(**options: Any) -> str:
        with fake_server([chat()]) as srv:
            provider = get_provider("ollama", base_url=srv.url + "/v1")
            agent_loop("x", "sys", provider=provider, model="qwen3:8b", **options)
        body = srv.requests[0]["json"]
        assert "reasoning_effort" not in body
        return str(body["messages"][0]["content"])

    assert system().endswith("/no_think")  # auto keeps small/medium tasks unthinking
    assert system(reasoning_scale="large") == "sys"
    assert system(thinking=True).endswith("\n/think")
    assert system(reasoning_policy="off").endswith("/no_think")


# -- Anthropic ---------------------------------------------------------------------------


def test_thinking_true_enables_extended_thinking_with_room_for_the_answer() -> None:
    result, (request,) = anthropic_request("claude-sonnet-4-6", thinking=True)
    body = request["json"]
    assert result.status == "done"
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert body["max_tokens"] == 8192 + 4096 and beta(request) is None


def test_auto_leaves_claude_thinking_off_and_levels_set_budgets() -> None:
    _, (request,) = anthropic_request("claude-sonnet-4-6")
    assert "thinking" not in request["json"]
    _, (request,) = anthropic_request("claude-sonnet-4-6", reasoning_policy="high")
    assert request["json"]["thinking"] == {"type": "enabled", "budget_tokens": 16384}
    _, (request,) = anthropic_request("claude-sonnet-4-6", reasoning_effort="low", max_tokens=9000)
    assert request["json"]["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert request["json"]["max_tokens"] == 9000
    # Opus 4.6+: manual budgets are deprecated; adaptive thinking with an effort instead
    _, (request,) = anthropic_request("claude-opus-4-6", reasoning_effort="low")
    assert request["json"]["thinking"] == {"type": "adaptive"}
    assert request["json"]["output_config"] == {"effort": "low"}
    assert request["json"]["max_tokens"] == 4096
    with pytest.warns(UserWarning, match="deprecated"):  # the SDK's warning: caller wins
        _, (request,) = anthropic_request("claude-opus-4-6", thinking={"budget_tokens": 4096})
    assert request["json"]["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    _, (request,) = anthropic_request("claude-sonnet-4-6", thinking=False)
    assert request["json"]["thinking"] == {"type": "disabled"}
    _, (request,) = anthropic_request("claude-3-5-haiku", reasoning_policy="high")
    assert "thinking" not in request["json"]  # a model without extended thinking


def test_native_thinking_dict_is_sent_as_given() -> None:
    native = {"type": "enabled", "budget_tokens": 1024}
    _, (request,) = anthropic_request("claude-sonnet-4-6", llm_options={"thinking": native})
    assert request["json"]["thinking"] == native


def test_interleaved_thinking_and_beta_features_reach_the_header(rec: Recorder) -> None:
    _, (request,) = anthropic_request(
        "claude-sonnet-4-6",
        thinking=True,
        interleaved_thinking=True,
        anthropic_beta_features=["context-1m-2025-08-07"],
    )
    assert beta(request) == "context-1m-2025-08-07,interleaved-thinking-2025-05-14"
    # Opus 4.6+ agent loops: thinking: true alone turns the interleaved beta on
    tools = [rec.tool("look")]
    _, (request,) = anthropic_request("claude-opus-4-6", thinking=True, tools=tools)
    assert beta(request) == "interleaved-thinking-2025-05-14"
    assert request["json"]["thinking"] == {"type": "adaptive"}
    _, (request,) = anthropic_request(
        "claude-opus-4-6", thinking=True, tools=tools, interleaved_thinking=False
    )
    assert beta(request) is None
    _, (request,) = anthropic_request("claude-sonnet-4-6", thinking=True, tools=tools)
    assert beta(request) is None


def test_thinking_conflicts_fail_before_any_request() -> None:
    result, requests = anthropic_request("claude-sonnet-4-6", thinking=True, temperature=0.2)
    assert requests == [] and result.error is not None
    assert result.error["category"] == "client" and "temperature" in result.error["message"]
    result, requests = anthropic_request(
        "claude-sonnet-4-6", reasoning_effort="high", max_tokens=2000
    )
    assert requests == [] and result.error is not None
    assert "max_tokens (2000) must exceed thinking.budget_tokens (16384)" in result.error["message"]
    result, requests = anthropic_request(
        "claude-sonnet-4-6", thinking=True, tool_choice="any", tools=[Recorder().tool("look")]
    )
    assert requests == [] and result.error is not None
    assert "tool_choice auto or none" in result.error["message"]
    result, requests = anthropic_request("claude-sonnet-4-6", thinking=True, temperature=1)
    assert len(requests) == 1 and result.status == "done"
    assert requests[0]["json"]["temperature"] == 1


def test_anthropic_gets_sampling_options_the_sdk_no_longer_types() -> None:
    # this SDK's messages.create() has no temperature/top_k parameters: they must still
    # reach the body (they used to raise TypeError before any request)
    result, (request,) = anthropic_request(
        "claude-sonnet-4-6", temperature=0.3, llm_options={"top_k": 5, "top_p": 0.9}
    )
    assert result.status == "done"
    body = request["json"]
    assert (body["temperature"], body["top_k"], body["top_p"]) == (0.3, 5, 0.9)


def test_thinking_blocks_go_back_with_the_tool_turn(rec: Recorder) -> None:
    thought = {"type": "thinking", "thinking": "look first", "signature": "sig-abc"}
    redacted = {"type": "redacted_thinking", "data": "opaque"}
    replies = [
        claude(
            [thought, redacted, {"type": "tool_use", "id": "tu_1", "name": "look", "input": {}}],
            "tool_use",
        ),
        claude([{"type": "text", "text": "done"}]),
    ]
    result, requests = anthropic_request(
        "claude-sonnet-4-6", replies, thinking=True, tools=[rec.tool("look")]
    )
    assert result.visible_text == "done" and rec.names() == ["look"]
    assistant = requests[1]["json"]["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"][:2] == [thought, redacted]
    assert assistant["content"][2]["type"] == "tool_use"


def test_streamed_thinking_blocks_keep_their_signature(rec: Recorder) -> None:
    def ev(data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return (data["type"], data)

    start = ev(
        {
            "type": "message_start",
            "message": {
                "id": "m",
                "type": "message",
                "role": "assistant",
                "model": "claude",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 8, "output_tokens": 1},
            },
        }
    )
    stream1 = [
        start,
        ev(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            }
        ),
        ev(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "plan "},
            }
        ),
        ev(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "it"},
            }
        ),
        ev(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "signature_delta", "signature": "sig-1"},
            }
        ),
        ev({"type": "content_block_stop", "index": 0}),
        ev(
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "tool_use", "id": "tu", "name": "look", "input": {}},
            }
        ),
        ev(
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": "{}"},
            }
        ),
        ev({"type": "content_block_stop", "index": 1}),
        ev(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 7},
            }
        ),
        ev({"type": "message_stop"}),
    ]
    stream2 = [
        start,
        ev(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            }
        ),
        ev(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "ok"},
            }
        ),
        ev({"type": "content_block_stop", "index": 0}),
        ev(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 1},
            }
        ),
        ev({"type": "message_stop"}),
    ]
    with fake_server([{"sse": stream1}, {"sse": stream2}]) as srv:
        provider = get_provider("anthropic", base_url=srv.url, api_key="k", stream=True)
        result = agent_loop(
            "x",
            provider=provider,
            model="claude-sonnet-4-6",
            thinking=True,
            tools=[rec.tool("look")],
        )
    assert rec.names() == ["look"]
    first = srv.requests[0]["json"]
    assert first["stream"] is True and first["thinking"]["type"] == "enabled"
    assistant = srv.requests[1]["json"]["messages"][1]
    assert assistant["content"][0] == {
        "type": "thinking",
        "thinking": "plan it",
        "signature": "sig-1",
    }
    assert result.visible_text == "ok"


# -- options plumbing --------------------------------------------------------------------


def test_reasoning_keys_reach_custom_providers_folded_and_aliased() -> None:
    provider = MockProvider(["ok"])
    agent_loop(
        "x",
        provider=provider,
        thinking_policy="low",
        problem_scale="large",
        interleaved_thinking=True,
        llm_options={"top_p": 0.3},
    )
    options = dict(provider.requests[0].options)
    assert options == {
        "top_p": 0.3,
        "reasoning_policy": "low",
        "reasoning_scale": "large",
        "interleaved_thinking": True,
    }


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"thinking": "loud"}, "thinking"),
        ({"thinking": {"mode": "on"}}, "thinking.mode"),
        ({"thinking": {"mode": "enabled", "budget_tokens": 10}}, "thinking.budget_tokens"),
        ({"thinking": {"mode": "enabled", "budgets": 2048}}, "thinking"),
        ({"reasoning_effort": "extreme"}, "reasoning_effort"),
        ({"thinking": False, "reasoning_effort": "high"}, "thinking"),
        ({"reasoning_policy": "max"}, "reasoning_policy"),
        ({"reasoning_policy": "low", "thinking_policy": "high"}, "thinking_policy"),
        ({"reasoning_scale": "huge"}, "reasoning_scale"),
        ({"reasoning_task": "poetry"}, "reasoning_task"),
        ({"interleaved_thinking": "yes"}, "interleaved_thinking"),
        ({"anthropic_beta_features": [1]}, "anthropic_beta_features"),
        ({"llm_options": {"reasoning_effort": "loud"}}, "reasoning_effort"),
    ],
)
def test_bad_reasoning_options_name_the_field(options: dict[str, Any], field: str) -> None:
    provider = MockProvider(["ok"])
    with pytest.raises(AgentOptionError, match=f"option '{field}'"):
        agent_loop("x", provider=provider, **options)
    assert provider.requests == []


def test_next_turn_llm_options_can_change_the_reasoning(rec: Recorder) -> None:
    def post_turn(turn: Any) -> dict[str, Any]:
        return {"llm_options": {"thinking_policy": "off"}}

    body_replies = [chat(None, ("c1", "look")), chat()]
    with fake_server(body_replies) as srv:
        provider = get_provider("openai", base_url=srv.url + "/v1", api_key="k")
        agent_loop(
            "x",
            provider=provider,
            model="gpt-5",
            tools=[rec.tool("look")],
            post_turn_callback=post_turn,
        )
    efforts = [r["json"]["reasoning_effort"] for r in srv.requests]
    assert efforts == ["medium", "minimal"]


def test_a_bad_next_turn_option_fails_the_turn_without_a_request() -> None:
    def post_turn(turn: Any) -> dict[str, Any]:
        return {"llm_options": {"reasoning_effort": "loud"}, "message": "go on"}

    with fake_server([chat(None, ("c1", "look")), chat()]) as srv:
        provider = get_provider("openai", base_url=srv.url + "/v1", api_key="k")
        rec = Recorder()
        result = agent_loop(
            "x",
            provider=provider,
            model="gpt-5",
            tools=[rec.tool("look")],
            post_turn_callback=post_turn,
        )
    assert len(srv.requests) == 1 and result.error is not None
    assert result.error["category"] == "client" and "reasoning_effort" in result.error["message"]
