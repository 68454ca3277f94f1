"""JSON Schema (draft 2020-12) of charter.toml, generated from :mod:`charter.manifest.spec`.

Editors (Taplo, Even Better TOML, VS Code) use it to complete and check manifests. The
schema describes shapes; rules that need the whole manifest (known handoff targets,
capability surface, cron syntax) are checked by ``charter persona check``.
"""

from __future__ import annotations

from typing import Any

from charter.policy import LEVEL_NAMES, SENSITIVE_PATHS

from .spec import MANIFEST, PERSONA, Field, TableSpec

SCHEMA_ID = "https://charter.dev/schemas/charter.toml.json"

_STRINGS = {"type": "array", "items": {"type": "string", "minLength": 1, "pattern": r"\S"}}


def _rules() -> dict[str, Any]:
    return {
        "oneOf": [
            _STRINGS,
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "allow": _STRINGS,
                    "deny": _STRINGS,
                    "allow_all_of": {"type": "array", "items": _STRINGS},
                },
            },
        ]
    }


def policy_schema() -> dict[str, Any]:
    """Schema of a policy table (charter's vocabulary and the portable aliases)."""
    rules = {"$ref": "#/$defs/rules"}
    path_rules = {
        "oneOf": [
            _STRINGS,
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "allow": _STRINGS,
                    "deny": _STRINGS,
                    "allow_all_of": {"type": "array", "items": _STRINGS},
                    "read": rules,
                    "write": rules,
                },
            },
        ]
    }
    props: dict[str, Any] = {
        dim: rules
        for dim in (
            "tools",
            "network",
            "commands",
            "bash",
            "shell",
            "mcp_servers",
            "mcpServers",
            "mcps",
            "skills",
            "members",
            "capabilities",
        )
    }
    props["paths"] = path_rules
    props["side_effect_level"] = {"enum": list(LEVEL_NAMES)}
    props["allow_sensitive"] = {"type": "array", "items": {"enum": list(SENSITIVE_PATHS)}}
    props["name"] = {"type": "string"}
    return {"type": "object", "additionalProperties": False, "properties": props}


def _field(f: Field) -> dict[str, Any]:
    out: dict[str, Any]
    if f.kind == "string":
        out = {"type": "string", "minLength": 1}
    elif f.kind == "strings":
        out = dict(_STRINGS)
    elif f.kind in ("number", "integer"):
        out = {"type": f.kind}
        if f.minimum is not None:
            out["minimum"] = f.minimum
        if f.maximum is not None:
            out["maximum"] = f.maximum
    elif f.kind == "enum":
        out = {"enum": list(f.choices)}
    elif f.kind == "table":
        assert f.table is not None
        out = {"$ref": f"#/$defs/{_def_name(f.table)}"}
    elif f.kind == "tables":
        assert f.table is not None
        out = {"type": "array", "items": {"$ref": f"#/$defs/{_def_name(f.table)}"}}
    elif f.kind == "policy":
        out = {"$ref": "#/$defs/policy"}
    elif f.kind == "mapping":
        out = {"type": "object", "additionalProperties": {"type": ["string", "number"]}}
    else:  # capability_set
        out = {
            "oneOf": [
                _STRINGS,
                {"type": "object", "additionalProperties": _STRINGS},
            ]
        }
    out["description"] = f.doc
    return out


def _def_name(spec: TableSpec) -> str:
    return spec.name.replace(" ", "_")


def _table(spec: TableSpec) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for f in spec.fields:
        props[f.name] = _field(f)
        for alias in f.aliases:
            props[alias] = {**_field(f), "description": f"Alias of {f.name}."}
    out: dict[str, Any] = {
        "type": "object",
        "description": spec.doc,
        "additionalProperties": False,
        "properties": props,
    }
    required = [f for f in spec.fields if f.required]
    plain = [f.name for f in required if not f.aliases]
    if plain:
        out["required"] = plain
    all_of = [
        {"anyOf": [{"required": [name]} for name in (f.name, *f.aliases)]}
        for f in required
        if f.aliases
    ]
    if spec is PERSONA:
        all_of.append({"anyOf": [{"required": ["tools"]}, {"required": ["capabilities"]}]})
    if all_of:
        out["allOf"] = all_of
    return out


def _collect(spec: TableSpec, defs: dict[str, Any]) -> None:
    for f in spec.fields:
        if f.table is not None and _def_name(f.table) not in defs:
            defs[_def_name(f.table)] = _table(f.table)
            _collect(f.table, defs)


def manifest_schema(kind: str = "manifest") -> dict[str, Any]:
    """The schema of ``charter.toml`` (``kind="manifest"``) or of a standalone persona file."""
    defs: dict[str, Any] = {"rules": _rules(), "policy": policy_schema()}
    _collect(MANIFEST, defs)
    if kind == "persona":
        root = dict(defs.pop("persona"))
        title = "charter persona file"
    else:
        root = _table(MANIFEST)
        # charter.toml is shared with other tools' sections.
        root["additionalProperties"] = True
        title = "charter.toml"
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID if kind == "manifest" else SCHEMA_ID.replace("charter.toml", "persona"),
        "title": title,
        **root,
        "$defs": defs,
    }
