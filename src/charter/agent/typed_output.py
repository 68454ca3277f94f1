"""Typed outputs: ``output_schema`` as a JSON Schema *or* a type (a pydantic model, a
dataclass, a TypedDict, any type pydantic's ``TypeAdapter`` takes).

- **Native structured output where the provider has it.** Each turn's request carries
  the schema (``request.options["output_schema"] = {name, schema, strict}``): OpenAI
  Chat Completions sends it as ``response_format`` (``json_schema``, ``strict`` when the
  schema allows OpenAI's strict mode: every property required), the Responses API as
  ``text.format``, Anthropic as a ``final_result`` tool the model answers through (forced
  with ``tool_choice`` when it is the only tool), whose input becomes the final text.
- **Text parsing elsewhere, with validation retries.** The system prompt states the
  schema; the final answer is parsed (a fenced ```json block or the outermost value) and
  validated; a failure goes back to the model as feedback up to ``schema_retries`` times.
- **The validated object is returned**: ``result.output`` is the model instance /
  dataclass / dict, ``result.data`` its JSON form.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .options import AgentOptionError
from .output_schema import check_schema, extract_json, validate_output

#: The tool Anthropic answers through (tool-forced structured output).
OUTPUT_TOOL = "final_result"


@dataclass(frozen=True)
class OutputSpec:
    """What the final answer must be: its JSON schema and how to validate it."""

    name: str
    schema: dict[str, Any]
    adapter: Any = None  # a pydantic TypeAdapter for a type, None for a JSON Schema

    @classmethod
    def parse(cls, value: Any) -> OutputSpec:
        if isinstance(value, Mapping):
            return cls("output", dict(check_schema(value)))
        import pydantic

        try:
            adapter = pydantic.TypeAdapter(value)
            schema = adapter.json_schema()
        except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError) as exc:
            raise AgentOptionError(
                "output_schema",
                "expected a JSON Schema dict or a type (pydantic model, dataclass, "
                f"TypedDict): {exc}",
            ) from None
        name = getattr(value, "__name__", "output")
        return cls(str(name), schema, adapter)

    def validate(self, text: str) -> tuple[Any, Any, str | None]:
        """``(object, json_data, None)`` when ``text`` holds a valid answer, else
        ``(None, None, why)``."""
        if self.adapter is None:
            data, problem = validate_output(text, self.schema)
            return data, data, problem
        import pydantic

        try:
            raw = extract_json(text)
        except ValueError as exc:
            return None, None, f"not JSON ({exc})"
        try:
            value = self.adapter.validate_python(raw)
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            where = "/".join(str(p) for p in first["loc"]) or "(root)"
            return None, None, f"at {where}: {first['msg']}"
        return value, self.adapter.dump_python(value, mode="json"), None

    def native(self) -> dict[str, Any]:
        """The request option providers lower into their structured-output parameter."""
        strict = _strict(self.schema)
        schema = _closed(copy.deepcopy(self.schema)) if strict else self.schema
        return {"name": _api_name(self.name), "schema": schema, "strict": strict}

    def instruction(self) -> str:
        return (
            "Your final answer must be only a JSON value matching this JSON schema "
            "(no prose around it):\n" + json.dumps(self.schema, sort_keys=True)
        )


def _api_name(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "_-" else "_" for c in name)
    return cleaned[:64] or "output"


def _objects(schema: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        if schema.get("type") == "object" or "properties" in schema:
            found.append(schema)
        for value in schema.values():
            found.extend(_objects(value))
    elif isinstance(schema, list):
        for value in schema:
            found.extend(_objects(value))
    return found


def _strict(schema: dict[str, Any]) -> bool:
    """Whether OpenAI's strict mode can take ``schema``: every object lists all its
    properties as required (optional fields would otherwise become mandatory)."""
    objects = _objects(schema)
    if not objects or schema.get("type") != "object":
        return False
    for obj in objects:
        props = set((obj.get("properties") or {}).keys())
        if props != set(obj.get("required") or []):
            return False
        if obj.get("additionalProperties") not in (None, False):
            return False
    return True


def _closed(schema: dict[str, Any]) -> dict[str, Any]:
    for obj in _objects(schema):
        obj["additionalProperties"] = False
    return schema


def output_tool(native: Mapping[str, Any]) -> dict[str, Any]:
    """The Anthropic tool whose input is the final answer."""
    return {
        "name": OUTPUT_TOOL,
        "description": "Give your final answer (call this once, when you are done).",
        "input_schema": dict(native["schema"]),
    }
