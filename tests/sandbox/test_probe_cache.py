"""The bubblewrap probe's success is cached across processes; failures never are."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROBE = (
    "import sys; from charter.sandbox.availability import _probe; "
    "ok, _, problem = _probe(sys.argv[1]); print(ok, problem)"
)


def _fake(path: Path, log: Path, code: int) -> None:
    path.write_text(f'#!/bin/sh\necho "$@" >> {log}\necho fake 0.1\nexit {code}\n')
    path.chmod(0o755)


def _run(binary: Path, cache: Path) -> str:
    env = {**os.environ, "CHARTER_CACHE_DIR": str(cache)}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(binary)], env=env, capture_output=True, text=True,
        timeout=60, check=True,
    )  # fmt: skip
    return out.stdout.strip()


def test_success_is_cached_until_the_binary_changes(tmp_path: Path) -> None:
    log, binary = tmp_path / "calls.log", tmp_path / "bwrap"
    _fake(binary, log, 0)
    assert _run(binary, tmp_path / "cache").startswith("True")
    first = log.read_text().count("\n")
    assert _run(binary, tmp_path / "cache").startswith("True")
    assert log.read_text().count("\n") == first  # the second process did not probe
    os.utime(binary, ns=(1, 1))  # a different bubblewrap: probed again
    _run(binary, tmp_path / "cache")
    assert log.read_text().count("\n") > first


def test_a_failure_is_probed_every_time(tmp_path: Path) -> None:
    log, binary = tmp_path / "calls.log", tmp_path / "bwrap"
    _fake(binary, log, 1)
    assert _run(binary, tmp_path / "cache").startswith("False")
    first = log.read_text().count("\n")
    assert _run(binary, tmp_path / "cache").startswith("False")
    assert log.read_text().count("\n") == 2 * first
