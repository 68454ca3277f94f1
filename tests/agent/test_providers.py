from __future__ import annotations

from typing import Any

import pytest

from charter.agent import agent_loop, get_provider

from .conftest import Recorder
from .fakeserver import fake_server
from .replies import responses

pytest.importorskip("openai")
pytest.importorskip("anthropic")


def chat(content: str | None = None, calls: list[tuple[str, str, str]] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in calls
        ]
    return {
        "json": {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
            ],
            "usage": {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15},
        }
    }


def test_openai_chat_tool_call_roundtrip(rec: Recorder) -> None:
    replies = [chat(None, [("call_a", "look", '{"q": 1}')]), chat("the answer")]
    with fake_server(replies) as srv:
        provider = get_provider("openai", base_url=srv.url + "/v1", api_key="k")
        result = agent_loop("x", "sys", provider=provider, model="m", tools=[rec.tool("look")])
    assert result.status == "done" and result.visible_text == "the answer"
    assert rec.calls == [("look", {"q": 1})]
    assert (result.llm.input_tokens, result.llm.output_tokens) == (22, 8)
    first, second = srv.requests
    assert first["path"] == "/v1/chat/completions"
    assert first["json"]["messages"][0] == {"role": "system", "content": "sys"}
    assert first["json"]["tools"][0]["function"]["name"] == "look"
    msgs = second["json"]["messages"]
    assert msgs[2]["tool_calls"][0]["id"] == "call_a"
    assert msgs[3] == {"role": "tool", "tool_call_id": "call_a", "content": "ok"}


def test_llm_options_reach_the_api_in_full() -> None:
    opts = {"top_p": 0.5, "seed": 7, "temperature": 0.1}
    with fake_server([chat("ok")]) as srv:
        provider = get_provider("openai", base_url=srv.url + "/v1", api_key="k")
        agent_loop("x", provider=provider, model="m", llm_options=opts)
    body = srv.requests[0]["json"]
    assert (body["top_p"], body["seed"], body["temperature"]) == (0.5, 7, 0.1)
    thinking = {"type": "enabled", "budget_tokens": 1024}
    with fake_server([anthropic_msg([{"type": "text", "text": "ok"}])]) as srv:
        provider = get_provider("anthropic", base_url=srv.url, api_key="k")
        agent_loop("x", provider=provider, llm_options={"top_p": 0.5, "thinking": thinking})
    body = srv.requests[0]["json"]
    assert body["top_p"] == 0.5 and body["thinking"] == thinking


def test_openai_chat_streaming(rec: Recorder) -> None:
    def chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> Any:
        return {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
            if delta is not None
            else [],
            "usage": usage,
        }

    stream1 = [
        chunk(
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "look", "arguments": ""},
                    }
                ],
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"q"'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ": 2}"}}]}, "tool_calls"),
        chunk(None, usage={"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}),
        "[DONE]",
    ]
    stream2 = [chunk({"content": "str"}), chunk({"content": "eamed"}, "stop"), "[DONE]"]
    with fake_server([{"sse": stream1}, {"sse": stream2}]) as srv:
        provider = get_provider("openai", base_url=srv.url + "/v1", api_key="k", stream=True)
        result = agent_loop("x", provider=provider, tools=[rec.tool("look")])
    assert rec.calls == [("look", {"q": 2})]
    assert result.visible_text == "streamed" and result.llm.input_tokens == 5
    assert srv.requests[0]["json"]["stream"] is True


def test_openai_responses_api(rec: Recorder) -> None:
    replies = [responses(None, [("call_1", "look", {})]), responses("via responses")]
    with fake_server(replies) as srv:
        provider = get_provider("openai-responses", base_url=srv.url + "/v1", api_key="k")
        result = agent_loop("x", "sys", provider=provider, tools=[rec.tool("look")])
    assert result.visible_text == "via responses" and rec.names() == ["look"]
    assert srv.requests[0]["path"] == "/v1/responses"
    assert srv.requests[0]["json"]["instructions"] == "sys"
    items = srv.requests[1]["json"]["input"]
    assert {"type": "function_call_output", "call_id": "call_1", "output": "ok"} in items


@pytest.mark.parametrize(
    ("reply", "category", "status_code"),
    [
        (
            {"status": 429, "json": {"error": {"message": "rate limited", "type": "rate"}}},
            "rate_limit",
            429,
        ),
        ({"status": 500, "json": {"error": {"message": "boom"}}}, "server", 500),
        ({"status": 200, "raw": b"{not json"}, "protocol", None),
    ],
)
@pytest.mark.parametrize("name", ["openai", "anthropic"])
def test_errors_end_in_provider_error(
    reply: dict[str, Any], category: str, status_code: int | None, name: str
) -> None:
    with fake_server([dict(reply)]) as srv:
        base = srv.url + ("/v1" if name == "openai" else "")
        provider = get_provider(name, base_url=base, api_key="k")
        result = agent_loop("x", provider=provider, llm_retries=0, model="m")
    assert result.status == "provider_error"
    assert result.error is not None
    assert result.error["category"] == category
    assert result.error["provider"] == name and result.error["phase"] == "turn"
    assert set(result.error) == {
        "category",
        "reason",
        "kind",
        "provider",
        "model",
        "message",
        "phase",
        "tool_format",
        "after_tool_result",
    }
    if status_code:
        assert result.error["reason"] == f"http_{status_code}"


def test_retry_over_real_sdk_recovers_from_429() -> None:
    replies = [{"status": 429, "json": {"error": {"message": "slow"}}}, chat("recovered")]
    with fake_server(replies) as srv:
        provider = get_provider("openai", base_url=srv.url + "/v1", api_key="k")
        result = agent_loop("x", provider=provider, llm_retries=1, llm_backoff_ms=0)
    assert result.visible_text == "recovered" and len(srv.requests) == 2


def anthropic_msg(content: list[dict[str, Any]], stop: str = "end_turn") -> dict[str, Any]:
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


def test_anthropic_messages_tool_use(rec: Recorder) -> None:
    replies = [
        anthropic_msg(
            [
                {"type": "text", "text": "checking"},
                {"type": "tool_use", "id": "tu_1", "name": "look", "input": {"q": 3}},
            ],
            "tool_use",
        ),
        anthropic_msg([{"type": "text", "text": "done"}]),
    ]
    with fake_server(replies) as srv:
        provider = get_provider("anthropic", base_url=srv.url, api_key="k")
        result = agent_loop("x", "sys", provider=provider, tools=[rec.tool("look")])
    assert rec.calls == [("look", {"q": 3})]
    assert result.visible_text == "checking\ndone" and result.llm.input_tokens == 24
    first, second = srv.requests
    assert first["path"] == "/v1/messages" and first["json"]["system"] == "sys"
    assert first["json"]["tools"][0]["input_schema"] == {"type": "object", "properties": {}}
    msgs = second["json"]["messages"]
    assert msgs[1]["content"][1] == {
        "type": "tool_use",
        "id": "tu_1",
        "name": "look",
        "input": {"q": 3},
    }
    assert msgs[2]["content"][0] == {"type": "tool_result", "tool_use_id": "tu_1", "content": "ok"}


def test_anthropic_streaming(rec: Recorder) -> None:
    start = (
        "message_start",
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
        },
    )
    stream1 = [
        start,
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "tool_use", "id": "tu", "name": "look", "input": {}},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": '{"q": '},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": "4}"},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 7},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    stream2 = [
        start,
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "fin"},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 2},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    with fake_server([{"sse": stream1}, {"sse": stream2}]) as srv:
        provider = get_provider("anthropic", base_url=srv.url, api_key="k", stream=True)
        result = agent_loop("x", provider=provider, tools=[rec.tool("look")])
    assert rec.calls == [("look", {"q": 4})]
    assert result.visible_text == "fin"
    assert (result.llm.input_tokens, result.llm.output_tokens) == (16, 9)


def test_ollama_uses_openai_compatible_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_server([chat("llama says hi")]) as srv:
        monkeypatch.setenv("OLLAMA_HOST", srv.url.removeprefix("http://"))
        result = agent_loop("x", provider=get_provider("ollama"), model="devstral")
    assert result.visible_text == "llama says hi"
    assert srv.requests[0]["path"] == "/v1/chat/completions"
    # the context window was asked first (here unanswered: 404)
    assert [r["path"] for r in srv.other_requests] == ["/api/show"]
    assert result.error is None


def test_provider_by_name_string_option() -> None:
    with fake_server([chat("named")]) as srv:
        import os

        os.environ["OPENAI_BASE_URL"] = srv.url + "/v1"
        try:
            result = agent_loop("x", provider="openai", model="m")
        finally:
            del os.environ["OPENAI_BASE_URL"]
    assert result.visible_text == "named"
