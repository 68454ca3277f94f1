from __future__ import annotations

import os
from pathlib import Path

import pytest

from charter.policy import PathContext, make_context


@pytest.fixture()
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "secrets").mkdir()
    (ws / "src" / "app.py").write_text("print(1)\n")
    return ws


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    (h / ".ssh").mkdir(parents=True)
    return h


@pytest.fixture()
def ctx(workspace: Path, home: Path) -> PathContext:
    return make_context(str(workspace), str(home))


def realpath(p: Path | str) -> str:
    return os.path.realpath(p)
