"""Package names that load their module on first use (PEP 562).

A cold ``charter print-policy`` or ``charter launch`` imports only what it touches, so the
packages (``charter.policy``, ``charter.manifest``, ``charter.launch``, ``charter.sandbox``)
map each public name to the module defining it. Standard library only: ``charter.policy``
imports nothing else of charter but this.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str,
    table: Mapping[str, str],
    namespace: dict[str, Any],
    *,
    cache: bool = True,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``table`` maps a name to its submodule.

    With ``cache`` a loaded name is stored in ``namespace`` (the package's globals), so
    later lookups skip ``__getattr__``; without it every lookup reads the submodule (a
    test that patches the submodule's name is seen through the package)."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        if cache:
            namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *table})

    return __getattr__, __dir__
