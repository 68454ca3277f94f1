"""Typed outputs: a pydantic model / dataclass / TypedDict as ``output_schema``; native
structured output where the provider has it, text parsing with validation retries
elsewhere; the validated object is ``result.output``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pydantic
import pytest
from typing_extensions import TypedDict  # pydantic needs it before Python 3.12

from charter.agent import AgentOptionError, MockProvider, agent_loop

from .fakeserver import fake_server
from .replies import provider_for, reply


class Verdict(pydantic.BaseModel):
    verdict: Literal["approve", "reject"]
    reasons: list[str]


@dataclass
class Point:
    x: int
    y: int


class Label(TypedDict):
    name: str


def test_a_model_output_is_validated_and_returned_with_retries() -> None:
    provider = MockProvider(
        [
            '{"verdict": "maybe", "reasons": []}',
            '```json\n{"verdict": "approve", "reasons": ["ok"]}\n```',
        ]
    )
    result = agent_loop("review", provider=provider, output_schema=Verdict, schema_retries=1)
    assert result.status == "done"
    assert result.output == Verdict(verdict="approve", reasons=["ok"])
    assert result.to_dict()["data"] == {"verdict": "approve", "reasons": ["ok"]}
    feedback = str(provider.requests[1].messages[-1]["content"])
    assert "verdict" in feedback  # the failing field went back to the model
    assert '"enum"' in (provider.requests[0].system or "")  # the schema was stated


def test_without_retries_an_invalid_answer_fails() -> None:
    result = agent_loop("x", provider=MockProvider(['{"x": "a"}']), output_schema=Point)
    assert result.status == "failed" and result.output is None
    assert "x" in result.to_dict()["output_schema_error"]


def test_dataclass_and_typeddict_outputs() -> None:
    result = agent_loop("x", provider=MockProvider(['{"x": 1, "y": "2"}']), output_schema=Point)
    assert result.output == Point(1, 2)
    result = agent_loop("x", provider=MockProvider(['{"name": "bug"}']), output_schema=Label)
    assert result.output == {"name": "bug"}


def test_a_non_type_is_refused() -> None:
    with pytest.raises(AgentOptionError, match="output_schema"):
        agent_loop("x", provider=MockProvider(["{}"]), output_schema=42)


def test_openai_gets_strict_json_schema_response_format() -> None:
    pytest.importorskip("openai")
    with fake_server([reply("openai", '{"verdict": "reject", "reasons": ["tests fail"]}')]) as srv:
        result = agent_loop(
            "x", provider=provider_for("openai", srv.url), model="m", output_schema=Verdict
        )
    fmt = srv.requests[0]["json"]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"]["additionalProperties"] is False
    assert result.output == Verdict(verdict="reject", reasons=["tests fail"])


def test_openai_responses_gets_text_format() -> None:
    pytest.importorskip("openai")
    with fake_server([reply("openai-responses", '{"x": 3, "y": 4}')]) as srv:
        result = agent_loop(
            "x", provider=provider_for("openai-responses", srv.url), model="m", output_schema=Point
        )
    fmt = srv.requests[0]["json"]["text"]["format"]
    assert fmt["type"] == "json_schema" and fmt["name"] == "Point"
    assert result.output == Point(3, 4)


def test_anthropic_answers_through_a_forced_output_tool() -> None:
    pytest.importorskip("anthropic")
    answer = ("tu_1", "final_result", {"verdict": "approve", "reasons": ["fine"]})
    with fake_server([reply("anthropic", None, [answer])]) as srv:
        result = agent_loop("x", provider=provider_for("anthropic", srv.url), output_schema=Verdict)
    body = srv.requests[0]["json"]
    assert body["tool_choice"] == {"type": "any"}  # a tool every turn: the answer is one
    assert any(t["name"] == "final_result" for t in body["tools"])
    assert result.status == "done" and result.output == Verdict(verdict="approve", reasons=["fine"])
    assert result.tools.calls == []  # the answer was not dispatched as a tool call
    assert len(srv.requests) == 1


def test_a_json_schema_dict_still_works() -> None:
    schema: dict[str, Any] = {"type": "object", "required": ["a"]}
    result = agent_loop("x", provider=MockProvider(['{"a": 1}']), output_schema=schema)
    assert result.output == {"a": 1} and result.to_dict()["data"] == {"a": 1}
