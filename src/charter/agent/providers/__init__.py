"""LLM providers: ``mock`` (scripted), ``openai`` (Chat Completions / Responses, any
OpenAI-compatible base URL), ``anthropic`` (Messages) and ``ollama`` (its OpenAI-compatible
endpoint). SDK-backed providers import their SDK lazily, on first use.
"""

from __future__ import annotations

import os
from typing import Any

from .base import (
    LlmRequest,
    LlmResponse,
    Provider,
    ProviderError,
    ToolCallRequest,
    classify_status,
)
from .mock import MockProvider, render_text_tool_call

PROVIDER_NAMES = ("mock", "openai", "openai-responses", "anthropic", "ollama")


def get_provider(spec: str | Provider, **kwargs: Any) -> Provider:
    """A provider from a name (``"openai"``, ``"mock:fixture.json"``, ...) or an instance.

    ``kwargs`` go to the provider's constructor (``base_url``, ``api_key``,
    ``http_client``, ``api`` for OpenAI ...).
    """
    if not isinstance(spec, str):
        return spec
    name, _, arg = spec.partition(":")
    if name == "mock":
        return MockProvider.from_file(arg, **kwargs) if arg else MockProvider(**kwargs)
    if name in ("openai", "openai-responses"):
        from .openai import OpenAIProvider

        if name == "openai-responses":
            kwargs.setdefault("api", "responses")
        return OpenAIProvider(**kwargs)
    if name == "ollama":
        from .openai import OpenAIProvider

        host = os.environ.get("OLLAMA_HOST", "http://127.0.0.1:11434")
        if not host.startswith("http"):
            host = "http://" + host
        kwargs.setdefault("base_url", host.rstrip("/") + "/v1")
        kwargs.setdefault("api_key", "ollama")
        return OpenAIProvider(name="ollama", **kwargs)
    if name == "anthropic":
        from .anthropic import AnthropicProvider

        return AnthropicProvider(**kwargs)
    raise ValueError(f"unknown provider {spec!r}; expected one of {', '.join(PROVIDER_NAMES)}")


__all__ = [
    "PROVIDER_NAMES",
    "LlmRequest",
    "LlmResponse",
    "MockProvider",
    "Provider",
    "ProviderError",
    "ToolCallRequest",
    "classify_status",
    "get_provider",
    "render_text_tool_call",
]
