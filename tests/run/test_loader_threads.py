"""Two worker threads loading the same file workflow at once (``serve --workers 2``, their
first runs side by side) both get its function: the module is registered before its body
runs, and the second thread used to find it half-imported ("'run' is not a function of
the module"; seen as one failed run in 600 under benchmarks/runtime_fleet.py)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from charter.manifest import load_manifest
from charter.run.errors import WorkflowLoadError
from charter.run.loader import load_workflow

MANIFEST = """
[[personas]]
name = "slow_import"
description = "A workflow whose module takes a while to import."
entry_workflow = "w.py:run"
autonomy_tier = "act_auto"
receipt_policy = "optional"
tools = ["noop"]
triggers = ["test.go"]
"""
# the function is defined after a pause: a reader of the half-run module misses it
WORKFLOW = """
import time

time.sleep(0.3)


def run(ctx):
    return "ran"
"""


def test_concurrent_loads_of_one_workflow_both_get_its_function(tmp_path: Path) -> None:
    (tmp_path / "charter.toml").write_text(MANIFEST)
    (tmp_path / "w.py").write_text(WORKFLOW)
    persona = load_manifest(str(tmp_path)).personas[0]
    results: list[Any] = []
    start = threading.Barrier(2)

    def load() -> None:
        start.wait()
        try:
            results.append(load_workflow(persona, tmp_path)(None))
        except WorkflowLoadError as exc:
            results.append(exc)

    threads = [threading.Thread(target=load) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == ["ran", "ran"]


def test_a_workflow_that_fails_to_import_fails_each_load(tmp_path: Path) -> None:
    """The twin: a broken module is not left half-registered for the next load."""
    (tmp_path / "charter.toml").write_text(MANIFEST)
    (tmp_path / "w.py").write_text("raise RuntimeError('broken at import')\n")
    persona = load_manifest(str(tmp_path)).personas[0]
    for _ in range(2):
        try:
            load_workflow(persona, tmp_path)
        except WorkflowLoadError as exc:
            assert "broken at import" in str(exc)
        else:
            raise AssertionError("a broken workflow loaded")
