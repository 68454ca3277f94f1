"""Tool arguments checked before a handler runs: typed from the function, or by schema.

A tool built from a function (:func:`~charter.agent.tools.make_tool` without explicit
``parameters``) gets its JSON schema *and* its validator from the type hints, through a
pydantic model of the signature (as pydantic-ai does with ``validate_call``): the model
sees the schema pydantic generates, and a call is validated (and coerced: ``"3"`` for an
``int`` is 3, a dict for a dataclass parameter becomes the dataclass) before the policy
decides it, so the handler receives exactly what was decided. A tool given an explicit
``parameters`` schema is validated against that schema (``jsonschema``).

Invalid arguments never reach the handler: the call comes back to the model as a tool
error naming each field (``{"status": "error", "error": ..., "retryable": true,
"invalid_arguments": [{"field", "message"}]}``) so it can call again.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any

from charter.errors import CharterError

Validator = Callable[[Mapping[str, Any]], dict[str, Any]]


class InvalidArguments(CharterError):
    """A tool call's arguments do not match the tool's parameters."""

    def __init__(self, tool: str, problems: list[dict[str, str]]) -> None:
        self.tool = tool
        self.problems = problems
        listed = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
        super().__init__(f"invalid arguments for {tool}: {listed}")

    def observation(self) -> dict[str, Any]:
        """What the model is told (a retryable tool error)."""
        return {
            "status": "error",
            "error": f"{self}. Call {self.tool} again with corrected arguments.",
            "retryable": True,
            "invalid_arguments": self.problems,
        }


def _field(loc: tuple[Any, ...] | list[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(arguments)"


def _strip_titles(schema: Any) -> Any:
    """pydantic's ``title`` keys repeat the names; the model does not need them."""
    if isinstance(schema, dict):
        return {
            k: _strip_titles(v)
            for k, v in schema.items()
            if not (k == "title" and isinstance(v, str))
        }
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


def from_signature(func: Callable[..., Any], name: str) -> tuple[dict[str, Any], Validator]:
    """The JSON schema of ``func``'s keyword parameters and a validator for them.

    The arguments are validated as a ``TypedDict`` of the signature (required keys for
    parameters without a default): the validator returns a plain dict of the validated
    values, and a parameter the call omits is left to the function's own default (it is
    also stated in the schema)."""
    import pydantic
    import typing_extensions

    # typing_extensions' TypedDict: pydantic needs it before Python 3.12
    typed_dict: Any = typing_extensions.TypedDict
    not_required: Any = typing_extensions.NotRequired

    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception:  # unresolvable forward references: untyped, as before
        hints = {}
    params = list(inspect.signature(func).parameters.values())
    fields: dict[str, Any] = {}
    defaults: dict[str, Any] = {}
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = hints.get(param.name, Any)
        if param.default is param.empty:
            fields[param.name] = annotation
        else:
            fields[param.name] = not_required[annotation]
            defaults[param.name] = param.default
    open_ended = any(p.kind is p.VAR_KEYWORD for p in params)
    arguments = typed_dict(f"{name}_arguments", fields)
    arguments.__pydantic_config__ = pydantic.ConfigDict(
        extra="allow" if open_ended else "forbid", arbitrary_types_allowed=True
    )
    adapter = pydantic.TypeAdapter(arguments)
    schema = _strip_titles(adapter.json_schema())
    schema.setdefault("properties", {})
    for key, value in defaults.items():
        try:
            schema["properties"][key]["default"] = adapter.dump_python({key: value}, mode="json")[
                key
            ]
        except Exception:  # a default JSON cannot show: the schema just omits it
            continue
    validate_python: Callable[[Any], Any] = adapter.validate_python

    def validate(arguments: Mapping[str, Any]) -> dict[str, Any]:
        try:
            value: dict[str, Any] = validate_python(arguments)
        except pydantic.ValidationError as exc:
            raise InvalidArguments(
                name, [{"field": _field(e["loc"]), "message": e["msg"]} for e in exc.errors()]
            ) from None
        return value

    return schema, validate


def from_schema(schema: Mapping[str, Any], name: str) -> Validator | None:
    """A validator for an explicit JSON schema (``None`` when it constrains nothing)."""
    if (
        not schema.get("properties")
        and not schema.get("required")
        and "type" in schema
        and schema.get("additionalProperties", True) is not False
    ):
        return None  # {"type": "object", "properties": {}}: any object passes
    import jsonschema

    checker = jsonschema.Draft202012Validator(dict(schema))

    def validate(arguments: Mapping[str, Any]) -> dict[str, Any]:
        problems = [
            {"field": _field(list(e.absolute_path)), "message": e.message}
            for e in checker.iter_errors(dict(arguments))
        ]
        if problems:
            raise InvalidArguments(name, problems)
        return dict(arguments)

    return validate
