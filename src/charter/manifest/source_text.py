"""Reading TOML / JSON sources, and finding the line of a field path for error messages."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

from .errors import Collector, ManifestError

_AT = re.compile(r"\s*\(at line (\d+), column (\d+)\)")
_END = re.compile(r"\s*\(at end of document\)")
_SEGMENT = re.compile(r"([^.\[\]]+)((?:\[\d+\])*)")
_HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\"' -]+?)\s*\]")


@lru_cache(maxsize=1)
def toml_parser() -> ModuleType:
    """tomli, tomllib's upstream (same grammar, same messages) shipped compiled with mypyc:
    about twice as fast on large manifests; the stdlib parser is the fallback. Imported on
    first use: a persona folder with only JSON needs neither (a few ms of every launch)."""
    try:
        import tomli

        return tomli
    except ImportError:  # pragma: no cover
        import tomllib

        return tomllib


def _header(line: str) -> tuple[str, bool] | None:
    """``(name, is_array)`` when ``line`` is a ``[table]`` or ``[[array]]`` header."""
    m = _HEADER.match(line)
    return (m[2].strip(), m[1] == "[[") if m else None


def read_text(file: Path, col: Collector) -> str | None:
    """The file's text, or ``None`` after recording why it could not be read."""
    try:
        return file.read_text(encoding="utf-8")
    except FileNotFoundError:
        col.add("", "file not found")
    except IsADirectoryError:
        col.add("", "is a directory, expected a file")
    except UnicodeDecodeError as exc:
        col.add("", f"not UTF-8 text: {exc.reason} at byte {exc.start}")
    except OSError as exc:
        col.add("", f"cannot read: {exc.strerror or exc}")
    return None


def parse_toml(text: str, col: Collector) -> dict[str, Any] | None:
    """Parse TOML; a syntax error is recorded with its line and column."""
    parser = toml_parser()
    try:
        data: dict[str, Any] = parser.loads(text)
        return data
    except parser.TOMLDecodeError as exc:
        message = str(exc)
        line = column = None
        m = _AT.search(message)
        if m:
            line, column = int(m[1]), int(m[2])
            message = _AT.sub("", message)
        elif _END.search(message):
            line = text.count("\n") + 1
            column = len(text.rsplit("\n", 1)[-1]) + 1
            message = _END.sub(" at end of document", message)
        col.at("", f"invalid TOML: {message}", line, column)
        return None


def parse_json(text: str, col: Collector) -> Any:
    """Parse JSON; a syntax error is recorded with its line and column. ``None`` on error."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        col.at("", f"invalid JSON: {exc.msg}", exc.lineno, exc.colno)
    except RecursionError:
        col.add("", "invalid JSON: nested too deeply")
    return None


def _segments(field_path: str) -> list[tuple[str, int | None]]:
    out: list[tuple[str, int | None]] = []
    for m in _SEGMENT.finditer(field_path):
        indexes = re.findall(r"\[(\d+)\]", m[2])
        out.append((m[1], int(indexes[0]) if indexes else None))
    return out


def locate(text: str, field_path: str) -> tuple[int, int] | None:
    """Best-effort (line, column) of ``field_path`` in TOML ``text``.

    Understands top-level keys, ``[table]`` and ``[[array]]`` headers (by occurrence) and
    keys inside a section, inline tables included; returns the deepest key it can find.
    """
    segments = _segments(field_path)
    if not segments or not text:
        return None
    lines = text.splitlines()
    head, index = segments[0]
    section_start, section_end = 0, len(lines)
    rest = segments
    if index is not None:
        # [[head]] number ``index`` (0-based) starts the section.
        seen = -1
        for n, line in enumerate(lines):
            if _header(line) == (head, True):
                seen += 1
                if seen == index:
                    section_start = n
                    break
        else:
            return None
        rest = segments[1:]
        section_end = _section_end(lines, section_start + 1, prefix=head)
    elif any(_header(line) == (head, False) for line in lines):
        section_start = next(n for n, line in enumerate(lines) if _header(line) == (head, False))
        rest = segments[1:]
        section_end = _section_end(lines, section_start + 1, prefix=head)
    else:
        # A top-level key: only lines before the first header count.
        section_end = next((n for n, line in enumerate(lines) if _header(line)), len(lines))
    best = (section_start + 1, 1)
    if not rest:
        return best
    key = rest[0][0]
    key_re = re.compile(rf"^\s*{re.escape(key)}\s*=")
    for n in range(section_start, section_end):
        if key_re.match(lines[n]):
            best = (n + 1, lines[n].index(key) + 1)
            # Deeper keys on the same (inline-table) line.
            col = best[1]
            for deeper, _ in rest[1:]:
                m = re.search(rf"\b{re.escape(deeper)}\s*=", lines[n][col - 1 :])
                if not m:
                    break
                col += m.start()
                best = (n + 1, col)
            break
    return best


def _section_end(lines: list[str], start: int, prefix: str) -> int:
    for n in range(start, len(lines)):
        header = _header(lines[n])
        if header and not header[0].startswith(prefix + "."):
            return n
    return len(lines)


def with_positions(errors: list[ManifestError], text: str) -> list[ManifestError]:
    """Fill in line/column of field errors from the TOML text (syntax errors keep theirs)."""
    out: list[ManifestError] = []
    for err in errors:
        if err.line is None and err.field_path:
            pos = locate(text, err.field_path)
            if pos:
                err = ManifestError(err.manifest_path, err.field_path, err.message, *pos)
        out.append(err)
    return out
