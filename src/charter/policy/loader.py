"""Reading policy files (JSON or TOML) with errors that name the file, field and expectation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import PolicyError, PolicyIssue
from .model import Policy


def load_policy_file(path: str | Path) -> Policy:
    """Load a policy file; a top-level ``policy`` table (as in persona.json) is unwrapped."""
    file = Path(path)
    source = str(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PolicyError([PolicyIssue("", "file not found")], source) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError([PolicyIssue("", f"cannot read: {exc}")], source) from None
    data = parse_policy_text(text, source, suffix=file.suffix.lower())
    prefix = ""
    if isinstance(data, dict) and set(data) - {"defaults", "mcpServers"} == {"policy"}:
        data, prefix = data["policy"], "policy"
    try:
        policy = Policy.from_dict(data, source=source) if isinstance(data, dict) else None
    except PolicyError as exc:
        if prefix:
            issues = [
                PolicyIssue(f"{prefix}.{i.field_path}".rstrip("."), i.message) for i in exc.issues
            ]
            raise PolicyError(issues, source) from None
        raise
    if policy is None:
        raise PolicyError([PolicyIssue(prefix, "expected a table/object at the top level")], source)
    if policy.name is None:
        policy = Policy(**{**_fields(policy), "name": file.stem})
    return policy


def _fields(policy: Policy) -> dict[str, Any]:
    return {f: getattr(policy, f) for f in policy.__dataclass_fields__}


def parse_policy_text(text: str, source: str, *, suffix: str = "") -> Any:
    """Parse TOML or JSON (by suffix; sniffed when the suffix says neither)."""
    as_json = suffix == ".json" or (suffix != ".toml" and text.lstrip().startswith(("{", "[")))
    if as_json:
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise PolicyError(
                [
                    PolicyIssue(
                        "", f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
                    )
                ],
                source,
            ) from None
    import tomllib  # only TOML policies need it

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError([PolicyIssue("", f"invalid TOML: {exc}")], source) from None
