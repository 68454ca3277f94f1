"""Finding the manifest and the persona-folder roots.

Precedence of persona folders (first wins for a given name; later ones are recorded as
shadowed and shown by ``charter persona inspect``):

1. ``.personas/`` in the project: next to ``charter.toml``, then at the repository root;
2. each entry of ``CHARTER_PERSONA_PATHS`` (colon-separated), in order;
3. ``~/.personas/``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

MANIFEST_NAME = "charter.toml"
FOLDER_ROOT_NAME = ".personas"
PATHS_ENV = "CHARTER_PERSONA_PATHS"


def find_repo_root(start: Path) -> Path | None:
    """The nearest directory at or above ``start`` that holds ``.git``."""
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return None


def find_manifest(start: Path) -> Path | None:
    """Walk up from ``start`` to the nearest ``charter.toml``, stopping at the repo root."""
    for directory in (start, *start.parents):
        candidate = directory / MANIFEST_NAME
        if candidate.is_file():
            return candidate
        if (directory / ".git").exists():
            return None
    return None


def persona_roots(
    project_dirs: list[Path],
    *,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
    include_global: bool = True,
) -> list[tuple[Path, str]]:
    """Folder roots in precedence order, as ``(directory, origin)``; missing ones skipped."""
    env = os.environ if env is None else env
    roots: list[tuple[Path, str]] = [(d / FOLDER_ROOT_NAME, "project") for d in project_dirs]
    if include_global:
        for entry in env.get(PATHS_ENV, "").split(os.pathsep):
            if entry.strip():
                roots.append((Path(entry.strip()).expanduser(), PATHS_ENV))
        home_dir = home if home is not None else _home()
        if home_dir is not None:
            roots.append((home_dir / FOLDER_ROOT_NAME, "home"))
    seen: set[Path] = set()
    out: list[tuple[Path, str]] = []
    for path, origin in roots:
        key = path.resolve() if path.exists() else path
        if key in seen or not path.is_dir():
            continue
        seen.add(key)
        out.append((path, origin))
    return out


def _home() -> Path | None:
    try:
        return Path.home()
    except (RuntimeError, KeyError):  # no HOME and no passwd entry
        return None
