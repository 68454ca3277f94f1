"""The ``anthropic`` provider: the Messages API (JSON or SSE streaming).

The SDK is imported on first use; pass ``http_client`` (an ``httpx2.AsyncClient``) to
inject one. SDK retries are off: retries belong to the loop's ``llm_caller``.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .. import reasoning
from ..streaming import current_sink, emit_reasoning, emit_text
from ..typed_output import OUTPUT_TOOL, output_tool
from ._errors import parse_arguments, sdk_error
from ._sdk import fit_to_sdk
from .base import LlmRequest, LlmResponse, ProviderError, ToolCallRequest


class AnthropicProvider:
    def __init__(
        self,
        *,
        name: str = "anthropic",
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: Any = None,
        stream: bool = False,
        timeout: float = 120.0,
        max_tokens: int = 4096,
        default_model: str = "claude-sonnet-4-6",
    ) -> None:
        self.name = name
        self.api_key = api_key
        self.base_url = base_url
        self.http_client = http_client
        self.stream = stream
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.default_model = default_model
        self._client: Any = None

    def client(self) -> Any:
        if self._client is None:
            import anthropic

            self._client = anthropic.AsyncAnthropic(
                api_key=self.api_key or os.environ.get("ANTHROPIC_API_KEY") or "unset",
                base_url=self.base_url or os.environ.get("ANTHROPIC_BASE_URL"),
                http_client=self.http_client,
                max_retries=0,
                timeout=self.timeout,
            )
        return self._client

    def payload(self, request: LlmRequest) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []

        def add(role: str, block: dict[str, Any]) -> None:
            if messages and messages[-1]["role"] == role:
                messages[-1]["content"].append(block)
            else:
                messages.append({"role": role, "content": [block]})

        for m in request.messages:
            role = m["role"]
            if role == "tool":
                add(
                    "user",
                    {
                        "type": "tool_result",
                        "tool_use_id": m["tool_call_id"],
                        "content": m["content"],
                    },
                )
                continue
            if role == "assistant":
                for block in m.get("reasoning") or ():
                    if block.get("type") in ("thinking", "redacted_thinking"):
                        add(role, dict(block))
            if m.get("content"):
                add(role, {"type": "text", "text": m["content"]})
            for c in m.get("tool_calls") or []:
                add(
                    "assistant",
                    {
                        "type": "tool_use",
                        "id": c["id"],
                        "name": c["name"],
                        "input": dict(c["arguments"]),
                    },
                )
        model = request.model or self.default_model
        lowered = reasoning.lower_anthropic(request, model, default_max_tokens=self.max_tokens)
        options = reasoning.strip(request.options)
        payload: dict[str, Any] = {
            "model": model,
            "max_tokens": int(options.get("max_tokens", self.max_tokens)),
            "messages": messages,
        }
        if request.system:
            payload["system"] = request.system
        if request.tools:
            payload["tools"] = [
                {
                    "name": t["name"],
                    "description": t.get("description", ""),
                    "input_schema": t["parameters"],
                }
                for t in request.tools
            ]
            choice = request.tool_choice
            if choice in ("auto", "any", "none"):
                payload["tool_choice"] = {"type": choice}
        native = options.get("output_schema")
        if isinstance(native, dict):
            # typed output, tool-forced: the answer is the input of a final_result call,
            # so every turn calls a tool (that one alone when there are no others); the
            # caller's own tool_choice wins, and extended thinking refuses forced tools
            payload["tools"] = [*payload.get("tools", []), output_tool(native)]
            if request.tool_choice is None and "thinking" not in lowered.params:
                payload["tool_choice"] = (
                    {"type": "any"} if request.tools else {"type": "tool", "name": OUTPUT_TOOL}
                )
        if "temperature" in options:
            payload["temperature"] = options["temperature"]
        payload.update(lowered.params)  # thinking, and max_tokens above its budget
        if lowered.headers:
            payload["extra_headers"] = lowered.headers
        # The rest of llm_options (top_p, top_k, ...) reaches the API in full.
        extra = {
            k: v
            for k, v in options.items()
            if k not in payload
            and k not in ("tool_choice", "stream", "max_tokens", "output_schema")
        }
        if extra:
            payload["extra_body"] = extra
        from anthropic.resources.messages import AsyncMessages

        return fit_to_sdk(payload, AsyncMessages.create)

    async def complete(self, request: LlmRequest) -> LlmResponse:
        import anthropic

        try:
            if self.stream or current_sink() is not None:  # agent_stream listens
                return await self._stream(request)
            message = await self.client().messages.create(**self.payload(request))
        except ProviderError:
            raise  # already classified (an invalid reasoning option)
        except Exception as exc:
            raise sdk_error(exc, self.name, anthropic) from exc
        text: list[str] = []
        calls = []
        thoughts: list[dict[str, Any]] = []
        for block in message.content or []:
            if block.type == "text":
                text.append(block.text)
            elif block.type == "thinking":
                thoughts.append(
                    {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
                )
            elif block.type == "redacted_thinking":
                thoughts.append({"type": "redacted_thinking", "data": block.data})
            elif block.type == "tool_use":
                args, err = parse_arguments(block.input)
                calls.append(ToolCallRequest(block.id, block.name, args, err))
        calls, answer = _answer(calls)
        if answer is not None:
            text = [answer]
        return LlmResponse(
            text="".join(text),
            tool_calls=tuple(calls),
            input_tokens=message.usage.input_tokens or 0,
            output_tokens=message.usage.output_tokens or 0,
            finish_reason=message.stop_reason,
            model=message.model,
            reasoning=tuple(thoughts),
        )

    async def _stream(self, request: LlmRequest) -> LlmResponse:
        stream = await self.client().messages.create(**self.payload(request), stream=True)
        text: list[str] = []
        blocks: dict[int, dict[str, Any]] = {}
        thoughts: dict[int, dict[str, Any]] = {}
        input_tokens = output_tokens = 0
        stop: str | None = None
        model: str | None = None
        async for event in stream:
            kind = event.type
            if kind == "message_start":
                model = event.message.model
                input_tokens = event.message.usage.input_tokens or 0
                output_tokens = event.message.usage.output_tokens or 0
            elif kind == "content_block_start":
                block = event.content_block
                if block.type == "tool_use":
                    blocks[event.index] = {"id": block.id, "name": block.name, "json": ""}
                elif block.type == "thinking":
                    thoughts[event.index] = {"type": "thinking", "thinking": "", "signature": ""}
                elif block.type == "redacted_thinking":
                    thoughts[event.index] = {"type": "redacted_thinking", "data": block.data}
            elif kind == "content_block_delta":
                delta = event.delta
                if delta.type == "text_delta":
                    text.append(delta.text)
                    emit_text(delta.text)
                elif delta.type == "input_json_delta":
                    blocks[event.index]["json"] += delta.partial_json
                elif delta.type == "thinking_delta":
                    thoughts[event.index]["thinking"] += delta.thinking
                    emit_reasoning(delta.thinking)
                elif delta.type == "signature_delta":
                    thoughts[event.index]["signature"] += delta.signature
            elif kind == "message_delta":
                stop = event.delta.stop_reason or stop
                if event.usage and event.usage.output_tokens is not None:
                    output_tokens = event.usage.output_tokens
        calls = []
        for index in sorted(blocks):
            b = blocks[index]
            args, err = parse_arguments(b["json"] or "{}")
            calls.append(ToolCallRequest(b["id"], b["name"], args, err))
        calls, answer = _answer(calls)
        if answer is not None:
            text = [answer]
            emit_text(answer)
        return LlmResponse(
            "".join(text),
            tuple(calls),
            input_tokens,
            output_tokens,
            stop,
            model,
            reasoning=tuple(thoughts[i] for i in sorted(thoughts)),
        )


def _answer(calls: list[ToolCallRequest]) -> tuple[list[ToolCallRequest], str | None]:
    """A ``final_result`` call is the typed answer, not a tool call: its input becomes
    the turn's text (the loop validates it like any final answer)."""
    for call in calls:
        if call.name == OUTPUT_TOOL:
            rest = [c for c in calls if c is not call]
            return rest, json.dumps(dict(call.arguments))
    return calls, None
