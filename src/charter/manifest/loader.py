"""Resolve and validate everything: charter.toml, persona files and persona folders.

:func:`load_manifest` is the one entry point the CLI, the runtime and the launcher use.
It never raises for bad input: problems come back in :attr:`Manifest.errors`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .capabilities import CapabilitySurface, add_declared, load_capabilities_file
from .discovery import (
    FOLDER_ROOT_NAME,
    MANIFEST_NAME,
    find_manifest,
    find_repo_root,
    persona_roots,
)
from .errors import Collector, ManifestError, ManifestWarning, join
from .fields import convert, read_strings, type_name
from .folders import FolderPersona, load_folder, persona_dirs, persona_files_in
from .model import ErrorScope, Manifest, Persona, PersonaSource
from .persona import BuildContext, build_persona
from .source_text import parse_json, parse_toml, read_text, with_positions
from .spec import MANIFEST, PERSONA, PERSONA_JSON_KEYS
from .syntax import TARGET_FORMS

if TYPE_CHECKING:
    from .workflow_model import HandoffRoute, TriggerSpec

#: Top-level keys that make a TOML file a manifest rather than a standalone persona file.
_MANIFEST_KEYS = frozenset(MANIFEST.names)
#: Of those, the keys a persona file cannot have (``triggers`` is both: a persona's trigger
#: names, a manifest's ``[[triggers]]`` tables).
_MANIFEST_ONLY = _MANIFEST_KEYS - frozenset(PERSONA.names)
#: Keys that make a file in a persona root a persona file (not a persona.json fragment
#: pulled in by ``include``, which has only defaults, mcpServers, policy, ...).
_PERSONA_KEYS = frozenset(PERSONA.lookup) - frozenset(PERSONA_JSON_KEYS)


#: Package-manager tables of harn.toml: accepted, and what charter does not take from them.
_PACKAGE_TABLES: dict[str, str] = {
    "package": "[package] is harn's package metadata (name, version, description): charter "
    "reads nothing from it and does not build, install or publish packages; a persona's "
    "provenance is its package_source",
    "dependencies": "[dependencies] are harn packages: charter does not resolve or install them",
}


class _Run:
    """State of one load: collectors (one per file), source texts, declared names."""

    def __init__(self) -> None:
        self.collectors: list[Collector] = []
        self.texts: dict[str, str] = {}
        self.personas: list[Persona] = []
        # name -> "file field_path" of the first declaration (valid or not)
        self.declared: dict[str, str] = {}
        self.routes_data: list[tuple[Collector, Any, Path]] = []
        self.surface = CapabilitySurface()
        self.custom_predicates: set[str] = set()
        self.handoff_refs: list[Any] = []
        self.scopes: list[ErrorScope] = []  # which errors belong to which persona
        #: where `charter persona eval` reads evals/<pack>.toml (the project directory)
        self.eval_dir: Path | None = None
        self.eval_files: dict[str, bool] = {}

    def collector(self, path: Path | str) -> Collector:
        col = Collector(str(path))
        self.collectors.append(col)
        return col

    def read_toml(self, file: Path) -> tuple[Collector, dict[str, Any] | None]:
        """A TOML file's table, or a ``.json`` persona file's object (errors recorded)."""
        col = self.collector(file)
        text = read_text(file, col)
        if text is None:
            return col, None
        if file.suffix.lower() != ".json":
            self.texts[str(file)] = text
            return col, parse_toml(text, col)
        data = parse_json(text, col)
        if data is None or isinstance(data, dict):
            return col, data
        col.add("", f"expected a JSON object (one persona), got {type_name(data)}")
        return col, None

    def declare(self, data: Any, col: Collector, path: str) -> bool:
        """Record a persona name; a second declaration of it is an error (returns False)."""
        if not isinstance(data, Mapping) or not isinstance(data.get("name"), str):
            return True
        name = data["name"].strip()
        self.scopes.append(ErrorScope(name, col.manifest_path, path))
        where = f"{col.manifest_path} {path}".strip() if path else col.manifest_path
        if name in self.declared:
            col.add(
                join(path, "name"),
                f"duplicate persona name {name!r} (first declared at {self.declared[name]})",
            )
            return False
        self.declared[name] = where
        return True

    def errors(self) -> tuple[ManifestError, ...]:
        out: list[ManifestError] = []
        for col in self.collectors:
            text = self.texts.get(col.manifest_path)
            out.extend(with_positions(col.errors, text) if text else col.errors)
        return tuple(out)

    def warnings(self) -> tuple[ManifestWarning, ...]:
        out: list[ManifestWarning] = []
        for col in self.collectors:
            text = self.texts.get(col.manifest_path)
            for warning in col.warnings:
                if text and warning.field_path:
                    [placed] = with_positions(
                        [ManifestError(col.manifest_path, warning.field_path, "")], text
                    )
                    warning = dataclasses.replace(warning, line=placed.line, column=placed.column)
                out.append(warning)
        return tuple(out)


def load_manifest(
    path: str | os.PathLike[str] | None = None,
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    home: str | os.PathLike[str] | None = None,
    include_global: bool = True,
) -> Manifest:
    """Find, read and validate personas; every problem is returned in ``errors``.

    ``path`` is a ``charter.toml``, a standalone persona TOML file, a persona folder, or a
    directory (its ``charter.toml``; else its ``*.toml`` persona files and ``.personas/``).
    Without ``path``, walk up from ``cwd`` to the nearest ``charter.toml``, stopping at the
    repository root. Persona folders come from the project, ``CHARTER_PERSONA_PATHS`` and
    ``~/.personas`` (the last two only with ``include_global``).
    """
    base = Path(cwd) if cwd is not None else Path.cwd()
    run = _Run()
    manifest_file: Path | None = None
    persona_files: list[Path] = []
    project_dir: Path
    extra_roots: list[tuple[Path, str]] = []
    shown: str | None
    if path is not None:
        target = Path(path).expanduser()
        target = target if target.is_absolute() else base / target
        shown = str(path)
        if not target.exists():
            error = ManifestError(shown, "", "no such file or directory")
            return Manifest(shown, errors=(error,))
        if target.is_dir():
            project_dir = target
            if (target / MANIFEST_NAME).is_file():
                manifest_file = target / MANIFEST_NAME
                shown = str(manifest_file)
            elif (target / "AGENTS.md").is_file() or target.name == FOLDER_ROOT_NAME:
                # a persona folder, or a .personas/ root itself (folders and persona files)
                extra_roots.append((target, "explicit"))
            else:
                persona_files = sorted(p for p in target.glob("*.toml") if p.is_file())
        else:
            project_dir = target.parent
            manifest_file = target
    else:
        found = find_manifest(base)
        if found is not None:
            manifest_file, project_dir = found, found.parent
            shown = str(found)
        else:
            project_dir = find_repo_root(base) or base
            shown = None

    run.eval_dir = project_dir
    if manifest_file is not None:
        _load_file(run, manifest_file)
    for file in persona_files:
        _load_file(run, file)  # a harn.toml-style manifest ([[personas]]) or one persona

    project_dirs = [project_dir]
    repo = find_repo_root(project_dir)
    if repo is not None and repo != project_dir:
        project_dirs.append(repo)
    explicit = {root.resolve() for root, _ in extra_roots}
    roots = extra_roots + [
        (root, origin)
        for root, origin in persona_roots(
            project_dirs,
            env=env,
            home=Path(home) if home is not None else None,
            include_global=include_global,
        )
        if root.resolve() not in explicit  # `--manifest .personas` is that root already
    ]
    _load_folders(run, roots)

    if (
        path is not None
        and manifest_file is None
        and not run.personas
        and not run.collectors
        and not persona_files
    ):
        run.collector(shown or str(path)).add(
            "", "no charter.toml, persona files (*.toml) or .personas/ folders here"
        )

    known = set(run.declared)
    for col, item_path, target in run.handoff_refs:
        if target.kind == "worker" and target.value not in known:
            # worker://NAME lands in persona NAME's inbox: checked here, not at dispatch
            # (a run handing off to worker://nobody reported completed, the handoff lost)
            col.add(
                item_path,
                f"unknown handoff target {target.raw!r}: worker://NAME names a persona "
                f"(known: {', '.join(sorted(known)) or 'none'})",
            )
        if target.kind == "persona" and target.value not in known:
            hint = (
                "; to hand off to people write human:<group> (e.g. human:maintainers)"
                if target.value.startswith("human")
                else ""
            )
            col.add(
                item_path,
                f"unknown handoff target {target.raw!r}: no persona of that name (known: "
                f"{', '.join(sorted(known)) or 'none'}); a target is {TARGET_FORMS}{hint}",
            )
    routes: list[HandoffRoute] = []
    triggers: list[TriggerSpec] = []
    for col, data, _file in run.routes_data:
        _load_routes(run, col, data, known, routes, triggers)

    return Manifest(
        manifest_path=shown,
        personas=tuple(run.personas),
        handoff_routes=tuple(routes),
        triggers=tuple(triggers),
        errors=run.errors(),
        warnings=run.warnings(),
        persona_roots=tuple((str(p), origin) for p, origin in roots),
        root=str(project_dir),
        scopes=tuple(run.scopes),
    )


def _load_file(run: _Run, file: Path) -> None:
    """A TOML file: a manifest (``[[personas]]`` etc.) or one standalone persona."""
    col, data = run.read_toml(file)
    if data is None:
        return
    if _is_manifest(file, data):
        _load_manifest_table(run, col, data, file)
    else:
        _build_standalone(run, col, data, file)


def _is_manifest(file: Path, data: dict[str, Any]) -> bool:
    """charter.toml, or a file with a manifest-only key; keys both kinds share (``triggers``)
    make it a manifest only when it names no persona."""
    if file.name == MANIFEST_NAME or _MANIFEST_ONLY & set(data):
        return True
    return "name" not in data and bool(_MANIFEST_KEYS & set(data))


def _load_persona_file(run: _Run, file: Path) -> None:
    col, data = run.read_toml(file)
    if data is not None:
        _build_standalone(run, col, data, file)


def _build_standalone(run: _Run, col: Collector, data: dict[str, Any], file: Path) -> None:
    first = run.declare(data, col, "")
    ctx = BuildContext(
        run.surface, file.parent, run.eval_dir, run.eval_files, handoff_refs=run.handoff_refs
    )
    persona = build_persona(data, "", col, ctx, PersonaSource("persona_file", str(file)))
    if persona is not None and first:
        run.personas.append(persona)


def _table_list(data: dict[str, Any], key: str, col: Collector, what: str) -> list[Any]:
    value = data.get(key, [])
    if isinstance(value, list):
        return value
    col.add(key, f"expected a list of {what} tables ([[{key}]]), got {type_name(value)}")
    return []


def _load_manifest_table(run: _Run, col: Collector, data: dict[str, Any], file: Path) -> None:
    for key in data:
        if key in _PACKAGE_TABLES:
            col.warn("foreign_table", key, _PACKAGE_TABLES[key])
        elif key not in _MANIFEST_KEYS:
            # charter.toml is shared with other sections; only near-misses are errors.
            close = _close_matches(key, MANIFEST.names, n=1, cutoff=0.8)
            if close:
                col.add(key, f"unknown top-level field {key!r}; did you mean {close[0]!r}?")
    base_dir = file.parent
    if "check" in data:
        ok, check = convert(data["check"], MANIFEST.lookup["check"], "check", col)
        if ok:
            _apply_check(run, check, col, base_dir)
    ctx = BuildContext(
        run.surface, base_dir, run.eval_dir, run.eval_files, handoff_refs=run.handoff_refs
    )
    personas = _table_list(data, "personas", col, "persona")
    firsts = [run.declare(item, col, f"personas[{i}]") for i, item in enumerate(personas)]
    for i, item in enumerate(personas):
        source = PersonaSource("manifest", str(file), f"personas[{i}]")
        persona = build_persona(item, f"personas[{i}]", col, ctx, source)
        if persona is not None and firsts[i]:
            run.personas.append(persona)
    if "persona_files" in data:
        for i, pattern in read_strings(data["persona_files"], "persona_files", col):
            if Path(pattern).is_absolute():
                # pathlib cannot glob absolute patterns; say so instead of failing inside it
                col.add(join("persona_files", i), f"expected a pattern relative to {base_dir}")
                continue
            try:
                matches = sorted(p for p in base_dir.glob(pattern) if p.is_file())
            except (ValueError, OSError) as exc:
                col.add(join("persona_files", i), f"invalid glob {pattern!r}: {exc}")
                continue
            if not matches:
                col.add(join("persona_files", i), f"no file matches {pattern!r}")
            for match in matches:
                _load_persona_file(run, match)
    run.routes_data.append((col, data, file))


def _apply_check(run: _Run, check: dict[str, Any], col: Collector, base_dir: Path) -> None:
    if "host_capabilities" in check:
        add_declared(run.surface, check["host_capabilities"], "check.host_capabilities", col)
    if "host_capabilities_path" in check:
        file = Path(check["host_capabilities_path"]).expanduser()
        load_capabilities_file(
            run.surface,
            file if file.is_absolute() else base_dir / file,
            "check.host_capabilities_path",
            col,
        )
    run.custom_predicates.update(v for _, v in check.get("custom_predicates", ()))


def _load_routes(
    run: _Run,
    col: Collector,
    data: dict[str, Any],
    known: set[str],
    routes: list[HandoffRoute],
    triggers: list[TriggerSpec],
) -> None:
    from .routes import build_route, build_trigger  # and the route and trigger dataclasses

    seen: dict[str, int] = {}
    for i, item in enumerate(_table_list(data, "handoff_routes", col, "handoff route")):
        path = f"handoff_routes[{i}]"
        if isinstance(item, Mapping) and isinstance(item.get("id"), str):
            if item["id"] in seen:
                col.add(
                    join(path, "id"),
                    f"duplicate route id {item['id']!r} "
                    f"(first declared at handoff_routes[{seen[item['id']]}])",
                )
            seen.setdefault(item["id"], i)
        route = build_route(item, path, col, known, run.custom_predicates)
        if route is not None:
            routes.append(route)
    seen = {}
    for i, item in enumerate(_table_list(data, "triggers", col, "trigger")):
        path = f"triggers[{i}]"
        if isinstance(item, Mapping) and isinstance(item.get("id"), str):
            if item["id"] in seen:
                col.add(
                    join(path, "id"),
                    f"duplicate trigger id {item['id']!r} "
                    f"(first declared at triggers[{seen[item['id']]}])",
                )
            seen.setdefault(item["id"], i)
        trigger = build_trigger(item, path, col, known)
        if trigger is not None:
            triggers.append(trigger)


def merge_folder(persona: Persona, folder: FolderPersona) -> Persona:
    """The manifest entry owns the operational contract; the folder owns the instructions.

    The folder's policy is intersected with the manifest's (tighten, never loosen).
    """
    return dataclasses.replace(
        persona,
        instructions=folder.instructions,
        folder_policy=folder.policy,
        sources=(*persona.sources, folder.source),
    )


def _load_folders(run: _Run, roots: list[tuple[Path, str]]) -> None:
    winners: dict[str, FolderPersona] = {}
    shadowed: dict[str, list[PersonaSource]] = {}
    order: list[str] = []
    for root, origin in roots:
        _load_root_files(run, root, origin)
        for folder in persona_dirs(root):
            name = folder.name
            if name in winners or name in shadowed:
                src = PersonaSource(
                    "folder",
                    str(folder),
                    provides="instructions and policy",
                    shadowed=True,
                    origin=origin,
                )
                shadowed.setdefault(name, []).append(src)
                continue
            run.scopes.append(ErrorScope(name, str(folder), folder=True))
            loaded = load_folder(folder, origin, run.collectors)
            if loaded is None:
                shadowed.setdefault(name, [])  # broken winner: don't fall back silently
                continue
            winners[name] = loaded
            order.append(name)
    by_name = {p.name: i for i, p in enumerate(run.personas)}
    for name in order:
        winner = winners[name]
        extra = tuple(shadowed.get(name, ()))
        if name in by_name:
            merged = merge_folder(run.personas[by_name[name]], winner)
            run.personas[by_name[name]] = dataclasses.replace(
                merged, sources=(*merged.sources, *extra)
            )
        elif name not in run.declared:
            persona = winner.as_persona()
            run.personas.append(dataclasses.replace(persona, sources=(*persona.sources, *extra)))
            run.declared[name] = winner.source.path
    for name in shadowed:
        run.declared.setdefault(name, "persona folder")


def _load_root_files(run: _Run, root: Path, origin: str) -> None:
    """Persona files (``*.json``, ``*.toml``) directly in a persona root such as ``.personas/``.

    A file with no persona field at its top (another tool's settings) is not a persona
    and is left alone. Problems in a persona file belong to that persona (named by the
    file when it names none), so one broken file leaves the others working. In the
    project's own roots a second declaration of a name is an error; in
    CHARTER_PERSONA_PATHS and ``~/.personas`` a name the project (or an earlier root)
    already declares is left to it, as folders are.
    """
    for file in persona_files_in(root):
        col, data = run.read_toml(file)
        name = data.get("name") if data is not None else None
        if data is not None and not _PERSONA_KEYS & set(data):
            run.collectors.remove(col)
            continue
        if not isinstance(name, str):
            run.scopes.append(ErrorScope(file.stem, str(file)))
        if data is None:
            continue
        if (
            origin not in ("project", "explicit")
            and isinstance(name, str)
            and name.strip() in run.declared
        ):
            run.collectors.remove(col)  # shadowed: the nearer declaration wins
            continue
        _build_standalone(run, col, data, file)


def _close_matches(word: str, possibilities: Any, n: int, cutoff: float) -> list[str]:
    import difflib  # only for a did-you-mean: not on every launch

    return difflib.get_close_matches(word, possibilities, n=n, cutoff=cutoff)
