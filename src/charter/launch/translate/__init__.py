"""Per-CLI translation of a persona's portable policy into what that CLI really enforces."""

from __future__ import annotations

from collections.abc import Callable

from . import claude, codex, gemini, opencode
from .common import (
    NONE,
    PARTIAL,
    STRENGTHS,
    STRONG,
    TIERS,
    Context,
    Element,
    Translation,
)

Translator = Callable[[Context], Translation]
Defaults = Callable[[Context], tuple[list[str], str | None]]

TRANSLATORS: dict[str, tuple[Translator, Defaults]] = {
    "claude": (claude.translate, claude.yolo_defaults),
    "codex": (codex.translate, codex.yolo_defaults),
    "gemini": (gemini.translate, gemini.yolo_defaults),
    "opencode": (opencode.translate, opencode.yolo_defaults),
}

__all__ = [
    "NONE",
    "PARTIAL",
    "STRENGTHS",
    "STRONG",
    "TIERS",
    "TRANSLATORS",
    "Context",
    "Element",
    "Translation",
]
