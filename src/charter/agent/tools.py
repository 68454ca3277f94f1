"""Tools: a Python callable, a JSON schema for its arguments, and policy annotations.

The annotations are :class:`charter.policy.ToolAnnotations`, the only thing the policy
trusts about a tool. A tool whose annotations declare no side-effect level counts as
``network`` (fail closed).
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from charter.policy import BUILTIN_TOOLS, SideEffectLevel, ToolAnnotations

_JSON_TYPES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    dict: "object",
    list: "array",
}


@dataclass(frozen=True)
class Tool:
    """A tool the model may call. ``handler`` receives the arguments as keyword arguments.

    ``handler`` may be sync or async. ``parameters`` is the JSON schema of the arguments
    object; ``annotations`` say what the tool touches (paths, commands, URLs, ...).
    """

    name: str
    handler: Callable[..., Any]
    description: str = ""
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    annotations: ToolAnnotations = field(default_factory=ToolAnnotations)
    is_async: bool = False
    #: Raw MCP identity (server, tool) when the tool is served by an MCP server.
    mcp: tuple[str, str] | None = None
    #: What a call would do, from its arguments, without doing it (e.g. the HTTP request
    #: ``{method, path, body}`` it would send): recorded by dry runs, proposals and
    #: approval requests in place of executing the call.
    preview: Callable[[Mapping[str, Any]], Any] | None = None
    #: Checks (and coerces) a call's arguments before the policy decides it; built from
    #: the handler's type hints by :func:`make_tool` (see :mod:`charter.agent.arguments`).
    #: ``None``: the dispatcher validates against ``parameters``.
    validator: Callable[[Mapping[str, Any]], dict[str, Any]] | None = field(
        default=None, compare=False, repr=False
    )

    def schema(self) -> dict[str, Any]:
        """The provider-neutral function schema ``{name, description, parameters}``."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": dict(self.parameters),
        }

    def with_annotations(self, annotations: ToolAnnotations) -> Tool:
        return replace(self, annotations=annotations)


def _json_type(annotation: Any) -> dict[str, Any]:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _json_type(args[0]) if len(args) == 1 else {}
    if origin is typing.Literal:
        return {"enum": list(typing.get_args(annotation))}
    if origin in (list, tuple, Iterable):
        item = typing.get_args(annotation)
        out: dict[str, Any] = {"type": "array"}
        if item:
            out["items"] = _json_type(item[0])
        return out
    if origin is dict or annotation is dict:
        return {"type": "object"}
    name = _JSON_TYPES.get(annotation)
    return {"type": name} if name else {}


def schema_from_signature(func: Callable[..., Any]) -> dict[str, Any]:
    """A JSON schema for ``func``'s keyword parameters (required = no default)."""
    try:
        hints = typing.get_type_hints(func)
    except Exception:
        hints = {}
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        properties[param.name] = _json_type(hints.get(param.name, Any))
        if param.default is param.empty:
            required.append(param.name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _annotations(
    name: str,
    annotations: ToolAnnotations | Mapping[str, Any] | None,
    side_effect_level: str | SideEffectLevel | None,
    kind: str | None,
) -> ToolAnnotations:
    if isinstance(annotations, ToolAnnotations):
        ann = annotations
    elif annotations is not None:
        ann = ToolAnnotations.from_dict(annotations)
    else:
        ann = BUILTIN_TOOLS.get(name.lower(), ToolAnnotations())
    if side_effect_level is not None:
        ann = replace(ann, side_effect_level=SideEffectLevel.parse(side_effect_level))
    if kind is not None:
        ann = replace(ann, kind=kind)
    return ann


def make_tool(
    func: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    annotations: ToolAnnotations | Mapping[str, Any] | None = None,
    side_effect_level: str | SideEffectLevel | None = None,
    kind: str | None = None,
) -> Tool:
    """Build a :class:`Tool` from a callable; schema and validator from its type hints
    unless ``parameters`` is given (then calls are validated against that schema).

    Without explicit annotations, a name in :data:`charter.policy.BUILTIN_TOOLS` takes
    its catalog annotations; anything else declares nothing (and so counts as network).
    """
    tool_name = name or func.__name__
    doc = inspect.getdoc(func) or ""
    validator = None
    if parameters is None:
        from .arguments import from_signature

        schema, validator = from_signature(func, tool_name)
    else:
        schema = dict(parameters)
    return Tool(
        name=tool_name,
        handler=func,
        description=description if description is not None else doc.split("\n\n")[0],
        parameters=schema,
        annotations=_annotations(tool_name, annotations, side_effect_level, kind),
        is_async=inspect.iscoroutinefunction(func),
        validator=validator,
    )


def tool(
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    annotations: ToolAnnotations | Mapping[str, Any] | None = None,
    side_effect_level: str | SideEffectLevel | None = None,
    kind: str | None = None,
) -> Any:
    """Decorator form of :func:`make_tool`: ``@tool`` or ``@tool(side_effect_level=...)``."""

    def wrap(f: Callable[..., Any]) -> Tool:
        return make_tool(
            f,
            name=name,
            description=description,
            parameters=parameters,
            annotations=annotations,
            side_effect_level=side_effect_level,
            kind=kind,
        )

    return wrap(func) if func is not None else wrap


def as_tools(items: Iterable[Tool | Callable[..., Any]] | Mapping[str, Any] | None) -> list[Tool]:
    """Normalise the ``tools`` option: Tools, plain callables, or a ``{name: callable}`` map."""
    if items is None:
        return []
    out: list[Tool] = []
    if isinstance(items, Mapping):
        for key, value in items.items():
            out.append(value if isinstance(value, Tool) else make_tool(value, name=key))
        return out
    for item in items:
        if isinstance(item, Tool):
            out.append(item)
        elif callable(item):
            out.append(make_tool(item))
        else:
            raise TypeError(f"tools: expected a Tool or a callable, got {type(item).__name__}")
    return out
