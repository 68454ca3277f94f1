"""A mock provider that also records the request body a real provider would build.

``WireMock(turns, route="openai"|"openai-responses"|"anthropic"|"ollama")`` replies from
its script like :class:`MockProvider` and, for every request, stores in ``bodies`` the
keyword arguments the OpenAI / Anthropic provider would pass to its SDK (the JSON body
plus ``extra_body`` / ``extra_headers``), so option probes can check the lowering without
a server.
"""

from __future__ import annotations

from typing import Any

from charter.agent import LlmRequest, LlmResponse, MockProvider
from charter.agent.providers.anthropic import AnthropicProvider
from charter.agent.providers.openai import OpenAIProvider


class WireMock(MockProvider):
    def __init__(self, turns: list[Any], *, route: str = "openai", **kwargs: Any) -> None:
        super().__init__(turns, **kwargs)
        self.route = route
        self.bodies: list[dict[str, Any]] = []

    async def complete(self, request: LlmRequest) -> LlmResponse:
        if self.route == "anthropic":
            self.bodies.append(AnthropicProvider().payload(request))
        elif self.route == "openai-responses":
            self.bodies.append(OpenAIProvider(api="responses")._responses_payload(request))
        else:
            self.bodies.append(OpenAIProvider(name=self.route)._chat_payload(request))
        return await super().complete(request)
