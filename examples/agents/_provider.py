"""Pick a real provider when a key/host is set, else the scripted mock."""

from __future__ import annotations

import os
from typing import Any

from charter.agent import MockProvider, get_provider


def choose(script: list[Any], default: Any = None) -> tuple[Any, str | None]:
    if os.environ.get("OPENAI_API_KEY"):
        return get_provider("openai"), os.environ.get("CHARTER_MODEL", "gpt-5-mini")
    if os.environ.get("ANTHROPIC_API_KEY"):
        return get_provider("anthropic"), os.environ.get("CHARTER_MODEL", "claude-sonnet-4-6")
    if os.environ.get("OLLAMA_HOST"):
        return get_provider("ollama"), os.environ.get("CHARTER_MODEL", "llama3.2")
    return MockProvider(script, default=default), None
