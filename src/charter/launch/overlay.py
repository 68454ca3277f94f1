"""The instructions file a CLI reads, composed from the persona's folder.

* the tool-specific file (``CLAUDE.md``, ``GEMINI.md``) wins over ``AGENTS.md``;
* the repository-wide meta file ``.personas/.shared/meta.AGENTS.md`` (``_shared`` also
  works; a ``meta.CLAUDE.md`` next to it wins for that tool) goes on top or at the bottom;
* ``<!-- include {"file": "x.md"} -->`` (relative to the including file, else in
  ``.personas/.shared/`` then ``_shared/``; a miss names every place looked; an absolute
  path, or one that resolves outside the persona roots and folders, is an error) and
  ``<!-- include {"persona": "name"} -->`` (that persona's instructions for the same tool)
  are expanded recursively; a cycle is an error naming the chain;
* ``{{persona}}`` and ``{{tool}}`` are substituted; any other ``{{...}}`` is left and warned.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from charter.errors import CharterError
from charter.manifest import Manifest, Persona

_INCLUDE = re.compile(r"<!--\s*include\s+(\{.*?\})\s*-->")
_VAR = re.compile(r"\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}")
META_DIRS = (".shared", "_shared")
META_POSITIONS = ("top", "bottom", "none")


class OverlayError(CharterError):
    """The overlay could not be composed (missing file, bad directive, include cycle)."""


@dataclass
class Overlay:
    text: str
    source: str  # the persona's instructions file used
    target: str  # the file name the CLI reads (CLAUDE.md, ...)
    meta: str | None = None
    includes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    shared: list[str] = field(default_factory=list)  # where includes are also looked up
    # where included files may be (resolved): the persona roots and the persona folders
    roots: list[str] = field(default_factory=list)


def instructions_file(persona: Persona, tool: str) -> str | None:
    """The persona's file for ``tool``: the tool-specific one when present, else AGENTS.md."""
    if persona.instructions is None:
        return None
    return persona.instructions.file_for(tool)


def shared_dirs(manifest: Manifest) -> list[str]:
    """``.personas/.shared`` (then ``_shared``) of each project persona root, in order."""
    out: list[str] = []
    for root, origin in manifest.persona_roots:
        if origin not in ("project", "explicit"):
            continue
        base = root if os.path.basename(root) == ".personas" else os.path.dirname(root)
        out.extend(os.path.join(base, sub) for sub in META_DIRS)
    return list(dict.fromkeys(out))


def include_roots(manifest: Manifest) -> list[str]:
    """Where ``<!-- include {"file": ...} -->`` may read: every persona root (a
    ``.personas`` directory, a ``CHARTER_PERSONA_PATHS`` entry), resolved."""
    return list(dict.fromkeys(os.path.realpath(root) for root, _ in manifest.persona_roots))


def _inside(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def find_meta(manifest: Manifest, target: str) -> str | None:
    """The repository-wide meta file (project persona roots only)."""
    for directory in shared_dirs(manifest):
        for name in (f"meta.{target}", "meta.AGENTS.md"):
            candidate = os.path.join(directory, name)
            if os.path.isfile(candidate):
                return candidate
    return None


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise OverlayError(f"cannot read {path}: {exc.strerror or exc}") from None


def compose(
    persona: Persona,
    manifest: Manifest,
    tool: str,
    target: str,
    *,
    meta: str = "top",
    lookup: Callable[[str], Persona | None] | None = None,
) -> Overlay:
    """Compose the overlay text for ``persona`` launched in ``tool``."""
    if meta not in META_POSITIONS:
        raise OverlayError(f"meta position must be one of {', '.join(META_POSITIONS)}")
    find = lookup or manifest.get
    source = instructions_file(persona, tool)
    result = Overlay(
        "", source or "", target, shared=shared_dirs(manifest), roots=include_roots(manifest)
    )
    if source is not None:  # a persona folder given directly (--manifest) counts too
        result.roots.append(os.path.realpath(os.path.dirname(source)))
    if source is None:
        body = f"# {persona.name}\n\n{persona.description}\n"
    else:
        body = _expand(
            _read(source), source, [("persona", persona.name), ("file", source)], tool, find, result
        )
    parts = [body]
    meta_file = find_meta(manifest, target) if meta != "none" else None
    if meta_file is not None:
        result.meta = meta_file
        meta_text = _expand(_read(meta_file), meta_file, [("file", meta_file)], tool, find, result)
        parts = [meta_text, body] if meta == "top" else [body, meta_text]
    text = "\n".join(p.rstrip("\n") + "\n" for p in parts if p.strip())
    result.text = _substitute(text, {"persona": persona.name, "tool": tool}, result)
    return result


def _chain(stack: list[tuple[str, str]]) -> str:
    return " -> ".join(f"{kind}:{value}" for kind, value in stack)


def _expand(
    text: str,
    path: str,
    stack: list[tuple[str, str]],
    tool: str,
    find: Callable[[str], Persona | None],
    result: Overlay,
) -> str:
    def replace(match: re.Match[str]) -> str:
        line = text.count("\n", 0, match.start()) + 1
        where = f"{path}:{line}"
        try:
            spec = json.loads(match.group(1))
        except ValueError as exc:
            raise OverlayError(f"{where}: include directive is not JSON: {exc}") from None
        if (
            not isinstance(spec, dict)
            or len(spec) != 1
            or not (isinstance(spec.get("file"), str) or isinstance(spec.get("persona"), str))
        ):
            raise OverlayError(
                f'{where}: expected {{"file": "..."}} or {{"persona": "..."}}, got {match.group(1)}'
            )
        if "file" in spec:
            wanted = spec["file"]
            if os.path.isabs(wanted) or wanted.startswith("~"):
                raise OverlayError(
                    f"{where}: included file {wanted!r} is an absolute path; an include is "
                    "relative to the including file or the shared folders, inside the "
                    f"persona folders ({', '.join(result.roots) or 'none'})"
                )
            # next to the including file first, then the shared snippet folders (as
            # agent-persona's init template lays them out)
            bases = [os.path.dirname(path), *result.shared]
            looked = [os.path.normpath(os.path.join(base, wanted)) for base in bases]
            found = next((c for c in looked if os.path.isfile(c)), None)
            if found is None:
                raise OverlayError(
                    f"{where}: included file {spec['file']!r} not found; looked in: "
                    + ", ".join(looked)
                )
            real = os.path.realpath(found)  # a symlink out of the folders escapes too
            if not _inside(real, result.roots):
                raise OverlayError(
                    f"{where}: included file {wanted!r} is {real}, outside the persona "
                    f"folders ({', '.join(result.roots) or 'none'})"
                )
            target = found
            key = ("file", target)
        else:
            other = find(spec["persona"])
            if other is None:
                raise OverlayError(f"{where}: included persona not found: {spec['persona']}")
            target_file = instructions_file(other, tool)
            if target_file is None:
                raise OverlayError(
                    f"{where}: persona {spec['persona']!r} has no instructions folder"
                )
            target = target_file
            folder = os.path.realpath(os.path.dirname(target_file))
            if folder not in result.roots:  # its own relative includes stay in its folder
                result.roots.append(folder)
            key = ("persona", other.name)
        if key in stack or (("file", target) in stack):
            raise OverlayError(f"{where}: include cycle: {_chain([*stack, key])}")
        result.includes.append(target)
        inner_stack = [*stack, key] if key[0] == "file" else [*stack, key, ("file", target)]
        return _expand(_read(target), target, inner_stack, tool, find, result).rstrip("\n")

    return _INCLUDE.sub(replace, text)


def _substitute(text: str, values: dict[str, str], result: Overlay) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in values:
            return values[name]
        result.warnings.append(f"unknown placeholder {{{{{name}}}}} left as is")
        return match.group(0)

    return _VAR.sub(replace, text)
