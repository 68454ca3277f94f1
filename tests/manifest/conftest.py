"""Shared helpers: isolate HOME and CHARTER_PERSONA_PATHS so user folders never leak in."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "personas"

PERSONA = """\
[[personas]]
name = "{name}"
description = "The {name} persona."
entry_workflow = "pkg.flows:run"
tools = ["read", "grep"]
autonomy_tier = "suggest"
receipt_policy = "required"
"""


@pytest.fixture(autouse=True)
def _isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CHARTER_PERSONA_PATHS", raising=False)
    monkeypatch.delenv("CHARTER_MANIFEST", raising=False)
    return home


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty repository (``.git`` marks its root)."""
    (tmp_path / ".git").mkdir()
    return tmp_path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
