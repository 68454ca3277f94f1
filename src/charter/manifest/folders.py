"""Persona folders (seed 004): ``.personas/NAME/`` (AGENTS.md, CLAUDE.md, GEMINI.md, persona.json).

A folder owns a persona's *instructions* and a portable policy. On its own it becomes a
persona with the defaults below; next to a ``charter.toml`` entry of the same name the
manifest owns the operational contract (see :func:`charter.manifest.loader.merge_folder`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from charter.policy import Policy

from .errors import Collector, join
from .fields import type_name, unknown_field_message
from .includes import resolve_includes
from .model import Instructions, Persona, PersonaSource
from .persona import parse_policy
from .source_text import parse_json, read_text
from .spec import LAUNCH_SANDBOX_MODES, PERSONA_JSON_KEYS, AutonomyTier, ReceiptPolicy
from .syntax import check_name, parse_entry

#: Entry workflow of a folder-only persona: the launcher runs it in an external coding CLI.
FOLDER_ENTRY_WORKFLOW = "charter.launch:run"
#: A folder persona is launched by a person at a terminal, so it acts with approval.
FOLDER_AUTONOMY = AutonomyTier.ACT_WITH_APPROVAL
FOLDER_RECEIPTS = ReceiptPolicy.OPTIONAL


@dataclass(frozen=True, slots=True)
class FolderPersona:
    """What one persona folder contributes."""

    name: str
    description: str
    instructions: Instructions
    policy: Policy | None
    source: PersonaSource

    def as_persona(self) -> Persona:
        """A stand-alone persona with the documented defaults for the operational fields."""
        entry = parse_entry(FOLDER_ENTRY_WORKFLOW)
        assert not isinstance(entry, str)
        return Persona(
            name=self.name,
            description=self.description,
            entry_workflow=entry,
            autonomy_tier=FOLDER_AUTONOMY,
            receipt_policy=FOLDER_RECEIPTS,
            folder_policy=self.policy,
            instructions=self.instructions,
            sources=(self.source,),
        )


def persona_dirs(root: Path) -> list[Path]:
    """Persona folders under a root; ``_shared``-style and hidden folders are not personas.

    A root that is itself a persona folder (it has AGENTS.md) is returned alone.
    """
    if (root / "AGENTS.md").is_file():
        return [root]
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return []
    return [p for p in entries if p.is_dir() and not p.name.startswith(("_", "."))]


#: Persona files a persona root (``.personas/``) may hold next to its folders.
ROOT_FILE_SUFFIXES = (".json", ".toml")


def persona_files_in(root: Path) -> list[Path]:
    """Standalone persona files directly in a persona root (``.personas/NAME.json``).

    A root that is itself a persona folder holds none (its ``persona.json`` is the
    folder's).
    """
    if (root / "AGENTS.md").is_file():
        return []
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return []
    return [
        p
        for p in entries
        if p.suffix.lower() in ROOT_FILE_SUFFIXES
        and p.is_file()
        and not p.name.startswith(("_", "."))
    ]


def describe(agents_md: str) -> str:
    """A one-line description: the first prose line of AGENTS.md, else its first heading."""
    heading = ""
    for line in agents_md.splitlines():
        text = line.strip()
        if not text or text.startswith(("<!--", "---", "```")):
            continue
        if text.startswith("#"):
            heading = heading or text.lstrip("#").strip()
            continue
        return text[:200]
    return heading[:200]


def load_folder(folder: Path, origin: str, errors: list[Collector]) -> FolderPersona | None:
    """Read one persona folder; problems go to a collector per file, appended to ``errors``."""
    start = len(errors)
    col = Collector(str(folder))
    errors.append(col)
    name = folder.name
    if err := check_name(name):
        col.add("", f"folder name is the persona name: {err}")
    agents = folder / "AGENTS.md"
    agents_text = read_text(agents, Collector(str(agents))) if agents.is_file() else None
    if agents_text is None:
        col.add("", "missing AGENTS.md (required in a persona folder: the instructions)")
    json_file = folder / "persona.json"
    defaults: dict[str, object] = {}
    servers: dict[str, object] = {}
    policy = None
    included: list[str] = []
    launch_sandbox: str | None = None
    if json_file.exists():
        jcol = Collector(str(json_file))
        errors.append(jcol)
        text = read_text(json_file, jcol)
        data = parse_json(text, jcol) if text is not None else None
        if text is not None and data is not None and not isinstance(data, Mapping):
            jcol.add("", f"expected a JSON object, got {type_name(data)}")
        elif (
            isinstance(data, Mapping)
            and (data := resolve_includes(data, json_file, folder.parent, errors, used=included))
            is not None
        ):
            for key, value in data.items():
                if key not in PERSONA_JSON_KEYS:
                    jcol.add(
                        str(key), unknown_field_message("persona.json", key, PERSONA_JSON_KEYS)
                    )
                elif key == "sandbox":
                    if value not in LAUNCH_SANDBOX_MODES:
                        jcol.add(
                            "sandbox",
                            f"expected one of {', '.join(LAUNCH_SANDBOX_MODES)}, got {value!r}",
                        )
                    else:
                        launch_sandbox = str(value)
                elif not isinstance(value, Mapping):
                    jcol.add(str(key), f"expected an object, got {type_name(value)}")
                elif key == "policy":
                    policy = parse_policy(value, "policy", jcol)
                elif key == "defaults":
                    defaults = dict(value)
                else:
                    servers = _mcp_servers(value, jcol)
        if any(errors[start:]):
            return None
    if col or agents_text is None:
        return None
    if policy is not None:
        policy = dataclasses.replace(policy, name=f"folder:{name}")
    optional = {n: folder / n for n in ("CLAUDE.md", "GEMINI.md")}
    instructions = Instructions(
        folder=str(folder),
        agents_md=str(agents),
        claude_md=str(optional["CLAUDE.md"]) if optional["CLAUDE.md"].is_file() else None,
        gemini_md=str(optional["GEMINI.md"]) if optional["GEMINI.md"].is_file() else None,
        persona_json=str(json_file) if json_file.is_file() else None,
        defaults=defaults,
        mcp_servers=servers,
        includes=tuple(included),
        sandbox=launch_sandbox,
    )
    return FolderPersona(
        name=name,
        description=describe(agents_text) or f"Persona folder {name}",
        instructions=instructions,
        policy=policy,
        source=PersonaSource(
            "folder", str(folder), provides="instructions and policy", origin=origin
        ),
    )


def _mcp_servers(value: Mapping[str, Any], col: Collector) -> dict[str, Any]:
    """persona.json ``mcpServers`` as every CLI can take them.

    ``env`` values become strings (``true`` -> ``"true"``, ``3`` -> ``"3"``): codex refuses
    a TOML boolean or number there, and an environment only holds strings anyway. A server
    with ``"enabled": false`` is left out, so no CLI gets it switched on.
    """
    servers: dict[str, Any] = {}
    for server, spec in value.items():
        where = join("mcpServers", str(server))
        if not isinstance(spec, Mapping):
            col.add(where, f"expected an object, got {type_name(spec)}")
            continue
        enabled = spec.get("enabled", True)
        if not isinstance(enabled, bool):
            col.add(join(where, "enabled"), f"expected true or false, got {type_name(enabled)}")
            continue
        if not enabled:
            continue
        entry = {k: v for k, v in spec.items() if k != "enabled"}
        env = spec.get("env")
        if env is not None:
            if not isinstance(env, Mapping):
                col.add(join(where, "env"), f"expected an object, got {type_name(env)}")
                continue
            fixed: dict[str, str] = {}
            for key, val in env.items():
                if isinstance(val, bool):
                    fixed[str(key)] = "true" if val else "false"
                elif isinstance(val, (str, int, float)):
                    fixed[str(key)] = str(val)
                else:
                    col.add(
                        join(join(where, "env"), str(key)),
                        f"expected a string, number or boolean, got {type_name(val)}",
                    )
            entry["env"] = fixed
        servers[str(server)] = entry
    return servers
