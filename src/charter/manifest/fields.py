"""Generic, spec-driven reading of one table: unknown fields, aliases, types, ranges.

:func:`read_table` never raises and never stops early: it records every problem in the
collector and returns the fields that *were* valid (under their canonical names), so
semantic checks can run on them too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .errors import Collector, join
from .spec import Field, TableSpec


def type_name(value: Any) -> str:
    """How a value is described in messages (TOML vocabulary)."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, (list, tuple)):
        return "a list"
    return "a date/time" if hasattr(value, "isoformat") else type(value).__name__


def unknown_field_message(kind: str, key: object, accepted: tuple[str, ...]) -> str:
    """``unknown persona field 'autonomy_teir'; did you mean 'autonomy_tier'? ...``."""
    msg = f"unknown {kind} field {str(key)!r}"
    close = _close_matches(str(key), accepted, n=1, cutoff=0.75)
    if close:
        msg += f"; did you mean {close[0]!r}?"
    return f"{msg} (expected one of: {', '.join(accepted)})"


#: The Python type a valid ``number`` / ``integer`` already has (the fast path).
_SCALAR: dict[str, type] = {"number": float, "integer": int}


def read_table(data: Any, spec: TableSpec, path: str, col: Collector) -> dict[str, Any] | None:
    """Check ``data`` against ``spec``; return the valid fields by canonical name.

    Returns ``None`` (after recording an error) when ``data`` is not a table at all.
    """
    # type() first: isinstance against the Mapping ABC is slow on the hot path.
    if type(data) is not dict and not isinstance(data, Mapping):
        col.add(path, f"expected a {spec.name} table, got {type_name(data)}")
        return None
    out: dict[str, Any] = {}
    written: dict[str, str] = {}  # canonical name -> key actually written
    lookup = spec.lookup
    for key, value in data.items():
        spec_field = lookup.get(key) if type(key) is str else None
        if spec_field is not None and spec_field.name not in written:
            name = spec_field.name
            written[name] = key
            # the common valid scalars, without building a field path nobody reads
            kind = spec_field.kind
            if type(value) is str:
                if kind == "string":
                    stripped = value.strip()
                    if stripped:
                        out[name] = stripped
                        continue
                elif kind == "enum" and value in spec_field.choices:
                    out[name] = value
                    continue
            elif type(value) is _SCALAR.get(kind) and _in_range(value, spec_field):
                out[name] = value  # a float for a number, an int (never a bool) for an integer
                continue
            ok, converted = convert(value, spec_field, f"{path}.{key}" if path else key, col)
            if ok:
                out[name] = converted
            continue
        key_path = f"{path}.{key}" if path else str(key)
        if spec_field is None:
            col.add(key_path, unknown_field_message(spec.name, key, spec.names))
        else:
            col.add(
                key_path,
                f"{key!r} and {written[spec_field.name]!r} both set "
                f"(they are the same field, {spec_field.name!r})",
            )
    for spec_field in spec.required:
        if spec_field.name not in written:
            alias = f" (or {', '.join(spec_field.aliases)})" if spec_field.aliases else ""
            col.add(join(path, spec_field.name), f"missing required field{alias}")
    return out


def convert(value: Any, f: Field, path: str, col: Collector) -> tuple[bool, Any]:
    """Check one value against its field; ``(False, None)`` after recording an error."""
    kind = f.kind
    if kind == "string":
        if not isinstance(value, str):
            col.add(path, f"expected a string, got {type_name(value)}")
            return False, None
        if not value.strip():
            col.add(path, "expected a non-blank string")
            return False, None
        return True, value.strip()
    if kind == "strings":
        return True, read_strings(value, path, col)
    if kind in ("number", "integer"):
        return _number(value, f, path, col)
    if kind == "enum":
        if not isinstance(value, str):
            col.add(path, f"expected one of {', '.join(f.choices)}, got {type_name(value)}")
            return False, None
        canonical = value.strip().lower().replace("-", "_")
        if canonical not in f.choices:
            col.add(path, f"expected one of {', '.join(f.choices)}, got {value!r}")
            return False, None
        return True, canonical
    if kind == "table":
        assert f.table is not None
        table = read_table(value, f.table, path, col)
        return table is not None, table
    if kind == "tables":
        assert f.table is not None
        if not isinstance(value, (list, tuple)):
            col.add(path, f"expected a list of {f.table.name} tables, got {type_name(value)}")
            return False, None
        items: list[dict[str, Any] | None] = [
            read_table(item, f.table, join(path, i), col) for i, item in enumerate(value)
        ]
        # Keep positions (None for broken entries) so later checks report the right index.
        return True, items
    if kind == "policy":
        if not isinstance(value, Mapping):
            col.add(path, f"expected a policy table, got {type_name(value)}")
            return False, None
        return True, value
    if kind == "mapping":
        return _mapping(value, path, col)
    # capability_set: a list or a table; the caller interprets it.
    if not isinstance(value, (list, tuple, Mapping)):
        col.add(path, f"expected a list or a table, got {type_name(value)}")
        return False, None
    return True, value


def read_strings(value: Any, path: str, col: Collector) -> list[tuple[int, str]]:
    """A list of non-blank strings, as ``(index, stripped value)`` pairs (bad entries dropped)."""
    if not isinstance(value, (list, tuple)):
        col.add(path, f"expected a list of strings, got {type_name(value)}")
        return []
    try:  # the usual case, all strings, in one pass
        out = [(i, item.strip()) for i, item in enumerate(value)]
        if all(stripped for _, stripped in out):
            return out
    except AttributeError:  # not a string somewhere: say where, below
        pass
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, str):
            col.add(join(path, i), f"expected a string, got {type_name(item)}")
        elif not item.strip():
            col.add(join(path, i), "blank entry; expected a non-blank string")
        else:
            out.append((i, item.strip()))
    return out


def _number(value: Any, f: Field, path: str, col: Collector) -> tuple[bool, Any]:
    integer = f.kind == "integer"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        col.add(path, f"expected {'an integer' if integer else 'a number'}, got {type_name(value)}")
        return False, None
    if integer and not isinstance(value, int):
        col.add(path, f"expected an integer, got {value!r}")
        return False, None
    if isinstance(value, float) and not math.isfinite(value):
        col.add(path, f"expected a finite number, got {value!r}")
        return False, None
    lo, hi = f.minimum, f.maximum
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        if lo is not None and hi is not None:
            col.add(path, f"must be between {_fmt(lo)} and {_fmt(hi)}, got {value!r}")
        elif lo is not None:
            what = "negative" if lo == 0 else f"below {_fmt(lo)}"
            col.add(path, f"must not be {what} (minimum {_fmt(lo)}), got {value!r}")
        else:
            col.add(path, f"must be at most {_fmt(hi or 0)}, got {value!r}")
        return False, None
    return True, value if integer else float(value)


def _in_range(value: Any, f: Field) -> bool:
    """A finite value within the field's bounds (NaN and infinities fail every test)."""
    lo = f.minimum if f.minimum is not None else -math.inf
    hi = f.maximum if f.maximum is not None else math.inf
    return lo <= value <= hi and math.isfinite(value)


def _fmt(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def _mapping(value: Any, path: str, col: Collector) -> tuple[bool, Any]:
    if not isinstance(value, Mapping):
        col.add(path, f"expected a table of strings, got {type_name(value)}")
        return False, None
    out: dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, (str, int, float)) and not isinstance(item, bool):
            out[str(key)] = str(item)
        else:
            col.add(join(path, str(key)), f"expected a string, got {type_name(item)}")
    return True, out


def _close_matches(word: str, possibilities: Any, n: int, cutoff: float) -> list[str]:
    import difflib  # only for a did-you-mean: not on every launch

    return difflib.get_close_matches(word, possibilities, n=n, cutoff=cutoff)
