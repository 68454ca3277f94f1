from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _session_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Agent sessions persist to disk: every test gets its own store, never ``~``."""
    path = tmp_path_factory.mktemp("sessions")
    monkeypatch.setenv("CHARTER_SESSION_DIR", str(path))
    return path
