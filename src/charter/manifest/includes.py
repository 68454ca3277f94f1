"""``persona.json`` ``include``: shared fragments a persona folder pulls in.

``"include": "base.json"``, ``{"file": "base.json"}`` (agent-persona's form) or a list
of them. Each name is looked up next to the
persona's folder (``.personas/NAME/``), then in ``.personas/.shared/`` and
``.personas/_shared/``; a miss names every place looked. A fragment is a persona.json
object itself (``defaults``, ``mcpServers``, ``policy``, and its own ``include``); it
must stay inside the ``.personas`` tree (no ``..`` or link out of it), and an include
cycle is an error naming the chain.

Fragments merge in order, then the persona's own file on top: objects merge key by key,
lists are joined (fragment entries first, duplicates dropped), anything else is replaced
by the later file. So a fragment's ``deny`` rules stay unless the persona's file replaces
the whole field with a non-list, and the merged policy is still checked as one policy.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import Collector, join
from .fields import type_name
from .source_text import parse_json, read_text

SHARED_DIRS = (".shared", "_shared")
_MAX_DEPTH = 8


def merge(base: Any, top: Any) -> Any:
    """``top`` over ``base``: objects by key, lists joined without duplicates."""
    if isinstance(base, Mapping) and isinstance(top, Mapping):
        out = dict(base)
        for key, value in top.items():
            out[key] = merge(out[key], value) if key in out else value
        return out
    if isinstance(base, list) and isinstance(top, list):
        joined: list[Any] = []
        for item in [*base, *top]:
            if item not in joined:
                joined.append(item)
        return joined
    return top


def _names(value: Any, where: str, col: Collector) -> list[str]:
    """The included file names: ``"a.json"``, a list of names, or agent-persona's
    entries ``{"file": "a.json"}`` (``{"persona": NAME}`` is refused, naming the form)."""
    if isinstance(value, (str, Mapping)):
        value = [value]
    if not isinstance(value, list):
        col.add(
            where,
            f'expected a file name, {{"file": NAME}}, or a list of them, got {type_name(value)}',
        )
        return []
    names: list[str] = []
    for i, item in enumerate(value):
        if isinstance(item, Mapping) and set(item) == {"file"}:
            item = item["file"]
        if isinstance(item, Mapping) and "persona" in item:
            col.add(
                f"{where}[{i}]",
                'an include of another persona ({"persona": NAME}) is not supported: '
                'include its persona.json file ({"file": NAME}) instead',
            )
            continue
        if not isinstance(item, str) or not item.strip():
            col.add(
                f"{where}[{i}]",
                f'expected a file name or {{"file": NAME}}, got {type_name(item)}',
            )
            continue
        names.append(item.strip())
    return names


def _locate(name: str, folder: Path, root: Path) -> tuple[Path | None, list[str]]:
    candidates = [folder / name, *(root / sub / name for sub in SHARED_DIRS)]
    if os.path.isabs(name):
        candidates = [Path(name)]
    looked = [str(c) for c in candidates]
    for candidate in candidates:
        if candidate.is_file():
            return candidate, looked
    return None, looked


def resolve_includes(
    data: Mapping[str, Any],
    file: Path,
    root: Path,
    errors: list[Collector],
    chain: tuple[str, ...] = (),
    used: list[str] | None = None,
) -> dict[str, Any] | None:
    """``data`` (read from ``file``) with its includes merged under it; ``None`` on errors."""
    start = len(errors)
    col = Collector(str(file))
    errors.append(col)
    own = {k: v for k, v in data.items() if k != "include"}
    if "include" not in data:
        return own
    real_root = os.path.realpath(root)
    merged: dict[str, Any] = {}
    for i, name in enumerate(_names(data["include"], "include", col)):
        where = join("include", i) if isinstance(data["include"], list) else "include"
        target, looked = _locate(name, file.parent, root)
        if target is None:
            col.add(where, f"included file {name!r} not found; looked in: {', '.join(looked)}")
            continue
        real = os.path.realpath(target)
        if os.path.commonpath([real, real_root]) != real_root:
            col.add(where, f"included file {name!r} resolves to {real}, outside {real_root}")
            continue
        if real in chain or real == os.path.realpath(file):
            cycle = " -> ".join([*chain, os.path.realpath(file), real])
            col.add(where, f"include cycle: {cycle}")
            continue
        if len(chain) >= _MAX_DEPTH:
            col.add(where, f"includes nest deeper than {_MAX_DEPTH}")
            continue
        fcol = Collector(str(target))
        errors.append(fcol)
        text = read_text(target, fcol)
        fragment = parse_json(text, fcol) if text is not None else None
        if fragment is None:
            continue
        if not isinstance(fragment, Mapping):
            fcol.add("", f"expected a JSON object, got {type_name(fragment)}")
            continue
        if used is not None:
            used.append(real)
        inner = resolve_includes(
            fragment, Path(target), root, errors, (*chain, os.path.realpath(file)), used
        )
        if inner is not None:
            merged = merge(merged, inner)
    if any(errors[start:]):
        return None
    result: dict[str, Any] = merge(merged, own)
    return result


__all__ = ["SHARED_DIRS", "merge", "resolve_includes"]
