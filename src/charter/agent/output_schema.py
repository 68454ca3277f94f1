"""``output_schema``: the loop's final answer is JSON that a JSON Schema accepts.

The completion candidate's text is parsed (a fenced ```json block or the outermost
object/array) and validated with ``jsonschema``; a failure is sent back as feedback and
the model retries, up to ``schema_retries`` times (profile default: 3 for ``verifier``,
0 otherwise), after which the loop ends ``failed`` with ``output_schema_invalid``. A
valid answer is the result's ``data``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .options import AgentOptionError

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def check_schema(schema: Any) -> Mapping[str, Any]:
    """A valid JSON Schema, or :class:`AgentOptionError` naming what is wrong."""
    import jsonschema

    if not isinstance(schema, Mapping):
        raise AgentOptionError("output_schema", "expected a JSON Schema object")
    try:
        jsonschema.Draft202012Validator.check_schema(dict(schema))
    except jsonschema.SchemaError as exc:
        raise AgentOptionError("output_schema", f"not a valid JSON Schema: {exc.message}") from None
    return schema


def extract_json(text: str) -> Any:
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced.group(1)
    text = text.strip()
    try:
        return json.loads(text)
    except ValueError:
        pass
    for opener, closer in (("{", "}"), ("[", "]")):
        start, end = text.find(opener), text.rfind(closer)
        if 0 <= start < end:
            return json.loads(text[start : end + 1])
    raise ValueError("no JSON value in the answer")


def validate_output(text: str, schema: Mapping[str, Any]) -> tuple[Any, str | None]:
    """``(data, None)`` when ``text`` holds JSON the schema accepts, else ``(None, why)``."""
    import jsonschema

    try:
        data = extract_json(text)
    except ValueError as exc:
        return None, f"not JSON ({exc})"
    errors = sorted(
        jsonschema.Draft202012Validator(dict(schema)).iter_errors(data),
        key=lambda e: list(e.absolute_path),
    )
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "(root)"
        return None, f"at {where}: {first.message}"
    return data, None
