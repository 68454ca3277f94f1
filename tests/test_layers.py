"""The layers of docs/architecture.md hold: no package of charter imports one above it.

Imports are read from the source with ``ast`` (function-level imports included: a lazy
import is still a dependency), so the test sees what ``import`` would do without running it.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import charter

SRC = Path(charter.__file__).resolve().parent

#: Bottom to top; a package may import its own layer's packages only where listed in
#: SAME_LAYER, and any package on a lower layer. Keep in step with docs/architecture.md.
LAYERS: list[set[str]] = [
    {"errors", "_lazy", "__init__"},
    {"policy"},
    {"sandbox"},
    {"agent", "runtime", "manifest"},
    {"tools", "testing"},
    {"run", "launch"},
    {"cli", "__main__"},
]
#: Imports within one layer the picture already shows (``charter`` re-exports the error
#: root; agent reads the manifest's capability catalog and the ledger's approvals; the fakes
#: in testing serve what tools call).
SAME_LAYER = {
    ("__init__", "errors"),
    ("__main__", "cli"),
    ("agent", "manifest"),
    ("agent", "runtime"),
    ("testing", "tools"),
}
#: Upward imports that remain, each with why; the list may only shrink.
KNOWN_UPWARD = {
    # agent/approvals.py: approval_store's durable approvals are charter.run's approval
    # events; they move to the ledger when approvals get a protocol of their own (issue 34).
    ("agent", "run"),
}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def package_imports() -> dict[tuple[str, str], list[str]]:
    """``(importer package, imported package) -> [importing modules]`` across packages."""
    found: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in SRC.rglob("*.py"):
        module = _module(path)
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    targets = [".".join(base + ([node.module] if node.module else []))]
                elif node.module:
                    targets = [node.module]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            for target in targets:
                if target == "charter" or target.startswith("charter."):
                    a, b = _package(module), _package(target)
                    if a != b:
                        found[(a, b)].append(module)
    return found


def _layer(package: str) -> int:
    for i, layer in enumerate(LAYERS):
        if package in layer:
            return i
    raise AssertionError(f"charter.{package} is on no layer: add it to LAYERS and the docs")


def test_every_package_is_on_a_layer() -> None:
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    packages |= {p.stem for p in SRC.glob("*.py")}
    for package in packages:
        _layer(package)


def test_no_package_imports_one_above_it() -> None:
    wrong = {}
    for (a, b), modules in package_imports().items():
        la, lb = _layer(a), _layer(b)
        upward = lb > la or (lb == la and (a, b) not in SAME_LAYER)
        if upward and (a, b) not in KNOWN_UPWARD:
            wrong[f"{a} -> {b}"] = sorted(set(modules))
    assert wrong == {}


def test_known_exceptions_still_exist() -> None:
    # An exception that no longer happens leaves the list, so it cannot hide a new one.
    assert set(package_imports()) >= KNOWN_UPWARD


def test_the_policy_core_imports_only_the_ground() -> None:
    assert {b for (a, b) in package_imports() if a == "policy"} <= {"errors", "_lazy"}
