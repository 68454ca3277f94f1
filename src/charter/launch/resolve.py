"""Which persona a launch uses, and why (``charter which``).

Personas come from :func:`charter.manifest.load_manifest`: the repository's ``.personas/``,
``CHARTER_PERSONA_PATHS``, ``~/.personas/`` and ``charter.toml`` personas, in that order
(first folder of a name wins). ``--prefer home`` (or ``CHARTER_PERSONA_PREFER=home``)
lets a ``~/.personas`` folder win over the repository's.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from charter.errors import CharterError
from charter.manifest import Manifest, Persona, PersonaSource, load_manifest

PREFER_ENV = "CHARTER_PERSONA_PREFER"


class ResolveError(CharterError):
    """A persona could not be resolved (message is for people)."""


@dataclass(frozen=True)
class Resolved:
    persona: Persona
    manifest: Manifest
    path: str  # the persona's directory (its folder, else the declaring file's directory)
    why: tuple[str, ...]
    candidates: tuple[PersonaSource, ...] = field(default=())

    def to_dict(self) -> dict[str, object]:
        return {
            "persona": self.persona.name,
            "path": self.path,
            "why": list(self.why),
            "sources": [s.to_dict() for s in self.candidates],
            "persona_roots": [{"path": p, "origin": o} for p, o in self.manifest.persona_roots],
            "manifest": self.manifest.manifest_path,
        }


def _home_folder_persona(source: PersonaSource, env: Mapping[str, str]) -> Persona | None:
    loaded = load_manifest(source.path, env=env, include_global=False)
    return next(iter(loaded.personas), None)


def _invalid_folder(name: str, loaded: Manifest) -> str | None:
    """When a folder for ``name`` exists but did not load: the persona is invalid (its
    errors, each with its file and field), not unknown."""
    for root, _origin in loaded.persona_roots:
        folder = os.path.join(root, name)
        if not os.path.isdir(folder):
            continue
        prefix = folder.rstrip("/") + "/"
        problems = [
            str(e)
            for e in loaded.errors
            # its own files, and what they include (an include error names the persona)
            if e.manifest_path.startswith(prefix) or name in str(e)
        ]
        if problems:
            return f"persona {name!r} in {folder} is invalid:\n" + "\n".join(problems)
    return None


def resolve_persona(
    name: str,
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    manifest: str | None = None,
    prefer: str | None = None,
) -> Resolved:
    """Find persona ``name``; raise :class:`ResolveError` with the reasons when it is missing."""
    env = dict(os.environ if env is None else env)
    prefer = (prefer or env.get(PREFER_ENV) or "repo").strip().lower()
    if prefer not in ("repo", "home"):
        raise ResolveError(f"--prefer must be 'repo' or 'home', got {prefer!r}")
    loaded = load_manifest(
        manifest or env.get("CHARTER_MANIFEST") or None,
        cwd=cwd,
        env=env,
        home=env.get("HOME"),
    )
    persona = loaded.get(name)
    if persona is None:
        invalid = _invalid_folder(name, loaded)
        if invalid is not None:
            raise ResolveError(invalid)
        known = ", ".join(loaded.names) or "none"
        roots = ", ".join(f"{p} ({o})" for p, o in loaded.persona_roots) or "none found"
        problems = [str(e) for e in loaded.errors if name in str(e)]
        detail = ("\n" + "\n".join(problems)) if problems else ""
        raise ResolveError(
            f"unknown persona {name!r} (known: {known}; persona folders searched: {roots})" + detail
        )
    why: list[str] = []
    sources = persona.sources
    winner = next((s for s in sources if s.kind == "folder" and not s.shadowed), None)
    if prefer == "home" and winner is not None and winner.origin != "home":
        home_src = next((s for s in sources if s.shadowed and s.origin == "home"), None)
        if home_src is not None:
            other = _home_folder_persona(home_src, env)
            if other is not None and other.instructions is not None:
                why.append(f"--prefer home: {home_src.path} wins over {winner.path}")
                flipped = tuple(
                    dataclasses.replace(s, shadowed=s is not home_src) if s.kind == "folder" else s
                    for s in sources
                )
                persona = dataclasses.replace(
                    persona,
                    instructions=other.instructions,
                    folder_policy=other.folder_policy,
                    sources=flipped,
                )
                winner = dataclasses.replace(home_src, shadowed=False)
    for src in persona.sources:
        if src.kind == "folder" and not src.shadowed:
            why.append(f"folder {src.path} (from {src.origin or 'project'}): {src.provides}")
        elif src.kind == "folder":
            why.append(f"shadowed: {src.path} (from {src.origin or '?'})")
        else:
            where = f"{src.path} {src.field_path}".strip()
            why.append(f"{src.kind} {where}: {src.provides}")
    if persona.instructions is not None:
        path = persona.instructions.folder
    else:
        declared = persona.manifest_source
        path = str(Path(declared).parent) if declared else (loaded.root or os.getcwd())
    return Resolved(persona, loaded, path, tuple(why), persona.sources)
