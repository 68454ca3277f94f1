from __future__ import annotations

from typing import Any

import pytest

from charter.agent import Tool, make_tool


class Recorder:
    """Tools whose handlers record every invocation (so tests can prove none ran)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def tool(self, name: str, level: str = "read_only", result: Any = "ok", **ann: Any) -> Tool:
        def handler(**kwargs: Any) -> Any:
            self.calls.append((name, kwargs))
            return result(**kwargs) if callable(result) else result

        return make_tool(
            handler,
            name=name,
            parameters={"type": "object", "properties": {}},
            annotations={"side_effect_level": level, **ann},
        )

    def names(self) -> list[str]:
        return [c[0] for c in self.calls]


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


def tc(tool_name: str, /, **arguments: Any) -> dict[str, Any]:
    """A scripted native tool-call turn."""
    return {"tool_calls": [{"name": tool_name, "arguments": arguments}]}
