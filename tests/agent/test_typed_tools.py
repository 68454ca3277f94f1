"""Typed tools: the schema and the validator come from the type hints; invalid arguments
go back to the model as a retryable error naming the field, never into the handler."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from charter.agent import MockProvider, agent_loop, make_tool

from .conftest import tc


@dataclass
class Window:
    start: int
    end: int


def _observations(result: Any) -> list[Any]:
    return [
        json.loads(m["content"]) if m["content"].startswith("{") else m["content"]
        for m in result.transcript["messages"]
        if m["role"] == "tool"
    ]


def test_the_schema_comes_from_the_type_hints() -> None:
    def search(
        query: str, mode: Literal["fast", "deep"] = "fast", window: Window | None = None
    ) -> str:
        return query

    schema = dict(make_tool(search, side_effect_level="read_only").parameters)
    assert schema["required"] == ["query"]
    props = schema["properties"]
    assert props["query"] == {"type": "string"}
    assert props["mode"]["enum"] == ["fast", "deep"]
    assert "Window" in json.dumps(schema)  # the dataclass parameter is described too
    assert schema.get("additionalProperties") is False


def test_wrong_type_and_out_of_enum_never_reach_the_handler() -> None:
    seen: list[tuple[Any, ...]] = []

    def resize(count: int, unit: Literal["px", "em"], window: Window) -> str:
        seen.append((count, unit, window))
        return "resized"

    tool = make_tool(resize, side_effect_level="read_only")
    provider = MockProvider(
        [
            tc("resize", count="many", unit="pt", window={"start": 1}),
            tc("resize", count="3", unit="px", window={"start": 1, "end": 2}),
            "done",
        ]
    )
    result = agent_loop("x", provider=provider, tools=[tool])
    first, second = _observations(result)
    assert first["status"] == "error" and first["retryable"] is True
    fields = {p["field"] for p in first["invalid_arguments"]}
    assert fields == {"count", "unit", "window.end"}
    assert "count" in first["error"] and "unit" in first["error"]
    assert second == "resized"
    # the handler ran once, with the validated, coerced values (an int, a Window)
    assert seen == [(3, "px", Window(1, 2))]
    # the model's next request carried the field-naming error
    assert "window.end" in str(provider.requests[1].messages[-1]["content"])


def test_unknown_arguments_are_refused() -> None:
    seen: list[str] = []

    def look(path: str) -> str:
        seen.append(path)
        return "ok"

    provider = MockProvider([tc("look", path="a", recursive=True), "done"])
    result = agent_loop(
        "x", provider=provider, tools=[make_tool(look, side_effect_level="read_only")]
    )
    assert seen == [] and "recursive" in _observations(result)[0]["error"]


def test_an_explicit_schema_is_enforced_too() -> None:
    seen: list[dict[str, Any]] = []
    tool = make_tool(
        lambda **kw: seen.append(kw) or "ok",
        name="paint",
        parameters={
            "type": "object",
            "properties": {"color": {"enum": ["red", "blue"]}},
            "required": ["color"],
        },
        side_effect_level="read_only",
    )
    provider = MockProvider([tc("paint", color="green"), tc("paint", color="red"), "done"])
    result = agent_loop("x", provider=provider, tools=[tool])
    first = _observations(result)[0]
    assert first["invalid_arguments"][0]["field"] == "color" and seen == [{"color": "red"}]


def test_a_policy_denial_wins_over_invalid_arguments() -> None:
    def deploy(target: int) -> str:
        return "deployed"

    tool = make_tool(deploy, side_effect_level="network")
    provider = MockProvider([tc("deploy", target="prod"), "done"])
    result = agent_loop(
        "x", provider=provider, tools=[tool], policy={"tools": {"deny": ["deploy"]}}
    )
    assert "permission_denied" in str(_observations(result)[0])
