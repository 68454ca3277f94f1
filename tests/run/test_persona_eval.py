"""``charter persona eval``: the template pack's evals run and pass with the mock provider,
and a check that does not hold fails the command (issue 16 §4)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACK = Path(__file__).resolve().parents[2] / "examples" / "personas"


def _eval(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "charter", "persona", "eval", *args, "--manifest", str(project)],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip


@pytest.fixture
def pack(tmp_path: Path) -> Path:
    copy = tmp_path / "pack"
    shutil.copytree(PACK, copy, ignore=shutil.ignore_patterns(".charter", "__pycache__"))
    return copy


@pytest.mark.parametrize("persona", ["merge_captain", "review_captain", "oncall_captain"])
def test_the_template_packs_evals_pass(pack: Path, persona: str) -> None:
    proc = _eval(pack, persona, "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    assert data["passed"] is True and data["evals"]
    for outcome in data["evals"]:
        assert outcome["run"]["status"] == "completed" and outcome["checks"]
    # the evals ran in a scratch copy: the pack itself is untouched
    assert not (pack / ".fake_github").exists() and not (pack / ".fake_pagerduty").exists()


def test_a_check_that_does_not_hold_fails_with_what_was_seen(pack: Path) -> None:
    triage = pack / "evals" / "incident_triage.toml"
    triage.write_text(triage.read_text().replace('approve = "deny"', 'approve = "grant"'))
    proc = _eval(pack, "oncall_captain")
    assert proc.returncode == 1
    assert "incident_triage  FAIL" in proc.stdout
    assert "acknowledged: expected False, got True" in proc.stdout


def test_bad_eval_files_are_input_errors(pack: Path) -> None:
    triage = pack / "evals" / "incident_triage.toml"
    triage.write_text(triage.read_text().replace("paged =", "pagd ="))
    proc = _eval(pack, "oncall_captain", "--json")
    assert proc.returncode == 2
    error = json.loads(proc.stdout)["error"]
    assert error["kind"] == "eval_invalid" and "expect.pagd: unknown check" in error["message"]
    assert _eval(pack, "nobody").returncode == 2
