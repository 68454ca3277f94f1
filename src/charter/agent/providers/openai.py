"""The ``openai`` provider: Chat Completions (JSON or SSE streaming) and Responses.

Any OpenAI-compatible base URL works (Ollama, vLLM, llama.cpp servers). The SDK is
imported on first use; pass ``http_client`` (an ``httpx2.AsyncClient``) to inject one.
SDK retries are off: retries belong to the loop's ``llm_caller`` (``with_retry``).
"""

from __future__ import annotations

import json
import os
from typing import Any

from .. import reasoning
from ..streaming import current_sink, emit_reasoning, emit_text
from ._errors import parse_arguments, sdk_error
from ._sdk import fit_to_sdk
from .base import LlmRequest, LlmResponse, ProviderError, ToolCallRequest


def _with_switch(system: str | None, switch: str | None) -> str | None:
    """The system prompt with a Qwen ``/think`` / ``/no_think`` soft switch appended."""
    if not switch:
        return system
    return f"{system}\n\n{switch}" if system else switch


def _extra(payload: dict[str, Any], options: dict[str, Any], skip: tuple[str, ...]) -> None:
    """Everything else in llm_options reaches the API in full (top_p, seed, stop, ...):
    ``extra_body`` merges it into the JSON body whatever this SDK version's signature is."""
    extra = {k: v for k, v in options.items() if k not in payload and k not in skip}
    if extra:
        payload["extra_body"] = extra


class OpenAIProvider:
    def __init__(
        self,
        *,
        name: str = "openai",
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: Any = None,
        api: str = "chat",
        stream: bool = False,
        timeout: float = 120.0,
        default_model: str = "gpt-5-mini",
    ) -> None:
        if api not in ("chat", "responses"):
            raise ValueError("api must be 'chat' or 'responses'")
        self.name = name
        self.api_key = api_key
        self.base_url = base_url
        self.http_client = http_client
        self.api = api
        self.stream = stream
        self.timeout = timeout
        self.default_model = default_model
        self._client: Any = None

    def client(self) -> Any:
        if self._client is None:
            import openai

            self._client = openai.AsyncOpenAI(
                api_key=self.api_key or os.environ.get("OPENAI_API_KEY") or "unset",
                base_url=self.base_url or os.environ.get("OPENAI_BASE_URL"),
                http_client=self.http_client,
                max_retries=0,
                timeout=self.timeout,
            )
        return self._client

    async def context_window(self, model: str | None) -> int | None:
        """The model's context window as the server reports it (Ollama's ``/api/show``:
        the ``num_ctx`` the model is served with, else its ``<arch>.context_length``);
        ``None`` where the API does not say (OpenAI's models endpoint has no window)."""
        if self.name != "ollama" or not model:
            return None
        import asyncio
        import urllib.request

        base = (self.base_url or "").rstrip("/")
        base = base[: -len("/v1")] if base.endswith("/v1") else base

        def show() -> dict[str, Any]:
            body = json.dumps({"model": model}).encode()
            req = urllib.request.Request(
                f"{base}/api/show", body, {"content-type": "application/json"}
            )
            with urllib.request.urlopen(req, timeout=self.timeout) as reply:
                data: dict[str, Any] = json.loads(reply.read())
                return data

        try:
            info = await asyncio.to_thread(show)
        except (OSError, ValueError):
            return None
        for line in str(info.get("parameters") or "").splitlines():
            key, _, value = line.strip().partition(" ")
            if key == "num_ctx" and value.strip().isdigit():
                return int(value.strip())
        details = info.get("model_info") or {}
        arch = details.get("general.architecture")
        length = details.get(f"{arch}.context_length") if arch else None
        return int(length) if isinstance(length, int) and length > 0 else None

    async def complete(self, request: LlmRequest) -> LlmResponse:
        import openai

        streaming = self.stream or current_sink() is not None  # agent_stream listens
        try:
            if self.api == "responses":
                if streaming:
                    return await self._responses_stream(request)
                return await self._responses(request)
            if streaming:
                return await self._chat_stream(request)
            return await self._chat(request)
        except ProviderError:
            raise  # already classified (an invalid reasoning option)
        except Exception as exc:
            raise sdk_error(exc, self.name, openai) from exc

    # -- Chat Completions ------------------------------------------------------------

    def _chat_payload(self, request: LlmRequest) -> dict[str, Any]:
        model = request.model or self.default_model
        lowered = reasoning.lower_openai(request, self.name, model, api="chat")
        messages: list[dict[str, Any]] = []
        system = _with_switch(request.system, lowered.system_suffix)
        if system:
            messages.append({"role": "system", "content": system})
        for m in request.messages:
            role = m["role"]
            if role == "tool":
                messages.append(
                    {"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"]}
                )
            elif role == "assistant" and m.get("tool_calls"):
                messages.append(
                    {
                        "role": "assistant",
                        "content": m.get("content") or None,
                        "tool_calls": [
                            {
                                "id": c["id"],
                                "type": "function",
                                "function": {
                                    "name": c["name"],
                                    "arguments": json.dumps(c["arguments"]),
                                },
                            }
                            for c in m["tool_calls"]
                        ],
                    }
                )
            else:
                messages.append({"role": role, "content": m.get("content") or ""})
        payload: dict[str, Any] = {"model": model, "messages": messages}
        if request.tools:
            payload["tools"] = [{"type": "function", "function": t} for t in request.tools]
            if request.tool_choice:
                payload["tool_choice"] = request.tool_choice
        options = {
            k: v for k, v in reasoning.strip(request.options).items() if k not in lowered.drop
        }
        for key in ("temperature", "max_tokens"):
            if key in options:
                payload[key] = options[key]
        payload.update(lowered.params)
        native = options.get("output_schema")
        if isinstance(native, dict):  # typed output: OpenAI's structured outputs
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": native["name"],
                    "schema": native["schema"],
                    "strict": native["strict"],
                },
            }
        _extra(payload, options, ("tool_choice", "stream", "stream_options", "output_schema"))
        from openai.resources.chat.completions import AsyncCompletions

        return fit_to_sdk(payload, AsyncCompletions.create)

    async def _chat(self, request: LlmRequest) -> LlmResponse:
        completion = await self.client().chat.completions.create(**self._chat_payload(request))
        choice = completion.choices[0]
        message = choice.message
        calls = []
        for call in message.tool_calls or []:
            args, err = parse_arguments(call.function.arguments)
            calls.append(ToolCallRequest(call.id, call.function.name, args, err))
        usage = completion.usage
        return LlmResponse(
            text=message.content or "",
            tool_calls=tuple(calls),
            input_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            output_tokens=getattr(usage, "completion_tokens", 0) or 0,
            finish_reason=choice.finish_reason,
            model=completion.model,
        )

    async def _chat_stream(self, request: LlmRequest) -> LlmResponse:
        payload = self._chat_payload(request)
        stream = await self.client().chat.completions.create(
            **payload, stream=True, stream_options={"include_usage": True}
        )
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        input_tokens = output_tokens = 0
        finish: str | None = None
        model: str | None = None
        async for chunk in stream:
            model = chunk.model or model
            if chunk.usage:
                input_tokens = chunk.usage.prompt_tokens or 0
                output_tokens = chunk.usage.completion_tokens or 0
            for choice in chunk.choices:
                delta = choice.delta
                if delta.content:
                    text.append(delta.content)
                    emit_text(delta.content)
                # OpenAI-compatible servers (vLLM, Ollama, DeepSeek) stream reasoning here
                thought = getattr(delta, "reasoning_content", None) or getattr(
                    delta, "reasoning", None
                )
                if isinstance(thought, str):
                    emit_reasoning(thought)
                for tc in delta.tool_calls or []:
                    slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                    if tc.id:
                        slot["id"] = tc.id
                    if tc.function and tc.function.name:
                        slot["name"] += tc.function.name
                    if tc.function and tc.function.arguments:
                        slot["arguments"] += tc.function.arguments
                finish = choice.finish_reason or finish
        out = []
        for index in sorted(calls):
            slot = calls[index]
            args, err = parse_arguments(slot["arguments"])
            out.append(ToolCallRequest(slot["id"] or f"call_{index}", slot["name"], args, err))
        return LlmResponse("".join(text), tuple(out), input_tokens, output_tokens, finish, model)

    # -- Responses -------------------------------------------------------------------

    def _responses_payload(self, request: LlmRequest) -> dict[str, Any]:
        items: list[dict[str, Any]] = []
        for m in request.messages:
            role = m["role"]
            if role == "tool":
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": m["tool_call_id"],
                        "output": m["content"],
                    }
                )
                continue
            if m.get("content"):
                items.append({"role": role, "content": m["content"]})
            for c in m.get("tool_calls") or []:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": c["id"],
                        "name": c["name"],
                        "arguments": json.dumps(c["arguments"]),
                    }
                )
        model = request.model or self.default_model
        lowered = reasoning.lower_openai(request, self.name, model, api="responses")
        payload: dict[str, Any] = {"model": model, "input": items}
        system = _with_switch(request.system, lowered.system_suffix)
        if system:
            payload["instructions"] = system
        if request.tools:
            payload["tools"] = [{"type": "function", **t} for t in request.tools]
            if request.tool_choice:
                payload["tool_choice"] = request.tool_choice
        options = reasoning.strip(request.options)
        for key in ("temperature", "top_p"):
            if key in options:
                payload[key] = options[key]
        if "max_tokens" in options:  # the Responses API's name for the same limit
            payload["max_output_tokens"] = options.pop("max_tokens")
        payload.update(lowered.params)
        native = options.get("output_schema")
        if isinstance(native, dict):  # typed output: the Responses API's text.format
            payload["text"] = {
                "format": {
                    "type": "json_schema",
                    "name": native["name"],
                    "schema": native["schema"],
                    "strict": native["strict"],
                }
            }
        _extra(payload, options, ("tool_choice", "stream", "output_schema"))
        from openai.resources.responses import AsyncResponses

        return fit_to_sdk(payload, AsyncResponses.create)

    async def _responses_stream(self, request: LlmRequest) -> LlmResponse:
        stream = await self.client().responses.create(
            **self._responses_payload(request), stream=True
        )
        final: Any = None
        async for event in stream:
            kind = getattr(event, "type", "")
            if kind == "response.output_text.delta":
                emit_text(event.delta)
            elif kind in (
                "response.reasoning_summary_text.delta",
                "response.reasoning_text.delta",
            ):
                emit_reasoning(event.delta)
            elif kind in ("response.completed", "response.incomplete"):
                final = event.response
            elif kind in ("response.failed", "error"):
                detail = getattr(getattr(event, "response", None), "error", None) or event
                raise ProviderError(
                    str(getattr(detail, "message", None) or detail),
                    category="server",
                    reason="stream_failed",
                    kind="ResponseFailed",
                    provider=self.name,
                )
        if final is None:
            raise ProviderError(
                "the Responses stream ended without response.completed",
                category="protocol",
                reason="truncated_stream",
                kind="TruncatedStream",
                retryable=True,
                provider=self.name,
            )
        return self._from_response(final)

    async def _responses(self, request: LlmRequest) -> LlmResponse:
        response = await self.client().responses.create(**self._responses_payload(request))
        return self._from_response(response)

    def _from_response(self, response: Any) -> LlmResponse:
        text: list[str] = []
        calls = []
        for item in response.output or []:
            if item.type == "message":
                for part in item.content or []:
                    if getattr(part, "type", None) == "output_text":
                        text.append(part.text)
            elif item.type == "function_call":
                args, err = parse_arguments(item.arguments)
                calls.append(ToolCallRequest(item.call_id, item.name, args, err))
        usage = response.usage
        return LlmResponse(
            text="".join(text),
            tool_calls=tuple(calls),
            input_tokens=getattr(usage, "input_tokens", 0) or 0,
            output_tokens=getattr(usage, "output_tokens", 0) or 0,
            finish_reason=getattr(response, "status", None),
            model=response.model,
        )
