"""Loading a persona's entry workflow and context packs."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from charter.manifest import Persona

from .errors import WorkflowLoadError

PACK_SUFFIXES = (".md", ".txt", ".toml", ".json", ".yaml", ".yml")
# A file workflow is registered in sys.modules before its body runs: without the lock a
# second worker thread (serve --workers N) found it half-imported, without its function.
_LOADING = threading.RLock()


def persona_dir(persona: Persona, fallback: Path | None = None) -> Path:
    """The directory of the file that declares the persona's operational contract."""
    source = persona.manifest_source
    if source:
        path = Path(source)
        return path.parent if path.suffix or path.is_file() else path
    return fallback or Path.cwd()


def load_workflow(persona: Persona, base: Path) -> Callable[..., Any]:
    """Import ``module.py:function`` (relative to ``base``) or ``package.module:function``."""
    entry = persona.entry_workflow
    if not entry.runnable:  # never import another host's file as Python
        raise WorkflowLoadError(f"persona {persona.name!r}: {entry.foreign_message}")
    if entry.path is not None:
        path = (base / entry.path).resolve()
        if not path.is_file():
            raise WorkflowLoadError(f"entry workflow {entry.raw!r}: {path} does not exist")
        digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
        module_name = f"charter_workflow_{persona.name}_{digest}"
        with _LOADING:
            module = _load_file(entry.raw, module_name, path)
    else:
        name = entry.module or ""
        if str(base) not in sys.path:
            sys.path.insert(0, str(base))
        try:
            module = importlib.import_module(name)
        except Exception as exc:
            raise WorkflowLoadError(
                f"entry workflow {entry.raw!r}: cannot import {name!r}: {type(exc).__name__}: {exc}"
            ) from exc
    func = getattr(module, entry.function, None)
    if not callable(func):
        raise WorkflowLoadError(
            f"entry workflow {entry.raw!r}: {entry.function!r} is not a function of the module"
        )
    return func  # type: ignore[no-any-return]


def _load_file(raw: str, module_name: str, path: Path) -> ModuleType:
    """The workflow module at ``path``, imported once (hold ``_LOADING``)."""
    module = sys.modules.get(module_name)
    if module is not None:
        return module
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise WorkflowLoadError(f"entry workflow {raw!r}: cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise WorkflowLoadError(
            f"entry workflow {raw!r}: import failed: {type(exc).__name__}: {exc}"
        ) from exc
    return module


def load_context_packs(persona: Persona, base: Path) -> dict[str, str]:
    """Each pack named by ``context_packs``: ``context/NAME.md`` (or .txt, .toml, .json, .yaml)
    or every file of a ``context/NAME/`` directory, next to the declaring manifest."""
    packs: dict[str, str] = {}
    missing: list[str] = []
    for name in persona.context_packs:
        root = base / "context"
        folder = root / name
        text: str | None = None
        if folder.is_dir():
            parts = [
                f"# {p.relative_to(folder)}\n{p.read_text(encoding='utf-8')}"
                for p in sorted(folder.rglob("*"))
                if p.is_file() and p.suffix in PACK_SUFFIXES
            ]
            text = "\n\n".join(parts)
        else:
            for suffix in PACK_SUFFIXES:
                candidate = root / f"{name}{suffix}"
                if candidate.is_file():
                    text = candidate.read_text(encoding="utf-8")
                    break
        if text is None:
            missing.append(name)
        else:
            packs[name] = text
    if missing:
        raise WorkflowLoadError(
            f"context pack(s) not found: {', '.join(missing)} "
            f"(looked for {base / 'context'}/NAME.md, .txt, ... or a NAME/ directory)"
        )
    return packs


__all__ = ["load_context_packs", "load_workflow", "persona_dir"]
