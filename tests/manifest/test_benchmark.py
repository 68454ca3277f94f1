"""benchmarks/manifest_check.py runs (at a tiny size): a broken benchmark fails here, not
the day someone needs its numbers (issue 36: it crashed on a renamed function)."""

from __future__ import annotations

import subprocess
import sys

from .conftest import REPO


def test_manifest_check_benchmark_runs_at_a_tiny_size() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "manifest_check.py"),
         "--personas", "5", "--repeat", "1"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "personas: 5 " in proc.stdout
    assert "ratio (medians):" in proc.stdout
    # five identical unreachable route rules: one kind of warning, printed once
    assert "warning lines printed: 1" in proc.stdout
