"""Run modes (unshare, swap), environment export, pass-through, signals, cleanup, recover.

The tool is a fake CLI (tests/launch/fakecli.py) that records what it saw."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import charter, env_with, make_persona

POLICY = {"tools": {"deny": ["webfetch"]}, "paths": {"deny": ["./secrets"]}}


@pytest.fixture(autouse=True)
def _no_os_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about run modes and locks; test_launch_sandbox.py is about the
    sandbox around the CLI."""
    monkeypatch.setenv("CHARTER_LAUNCH_SANDBOX", "never")


def _unshare_available() -> bool:
    from charter.launch.runner import unshare_works

    return unshare_works()


needs_unshare = pytest.mark.skipif(not _unshare_available(), reason="no mount namespaces here")


def _setup(project: Path, fakebin: Path, **extra: str) -> tuple[dict[str, str], Path]:
    make_persona(project / ".personas", "rev", "I am {{persona}} in {{tool}}.\n", policy=POLICY)
    capture = project.parent / "capture.json"
    env = env_with(fakebin, FAKE_CLI_CAPTURE=str(capture), **extra)
    return env, capture


def _record(capture: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(capture.read_text())
    return data


def _temp_paths(record: dict[str, Any]) -> list[str]:
    return [a.split("=", 1)[1] for a in record["argv"] if a.startswith("--settings=")]


@needs_unshare
def test_unshare_bind_mounts_the_overlay_and_never_touches_the_real_file(
    project: Path, fakebin: Path
) -> None:
    env, capture = _setup(project, fakebin)
    (project / "CLAUDE.md").write_text("ORIGINAL\n")
    out = charter(
        "launch", "claude", "rev", "--run-mode", "unshare", "--", "-p", "hi", cwd=project, env=env
    )
    assert out.returncode == 0, out.stderr
    rec = _record(capture)
    assert rec["overlay"] == "I am rev in claude.\n"
    assert (project / "CLAUDE.md").read_text() == "ORIGINAL\n"
    e = rec["env"]
    assert e["AGENT_PERSONA_NAME"] == "rev" and e["CHARTER_PERSONA"] == "rev"
    assert e["AGENT_PERSONA_PATH"] == str(project / ".personas" / "rev")
    assert e["AGENT_PERSONA_TOOL"] == "claude"
    assert e["AGENT_PERSONA_OVERLAY_FILE"] == "CLAUDE.md"
    assert e["AGENT_PERSONA_RUN_MODE"] == "unshare"
    assert rec["cwd"] == str(project.resolve())
    # The policy files existed while the tool ran and are gone now.
    (settings,) = _temp_paths(rec)
    assert settings in rec["files"] and not os.path.exists(settings)
    assert not os.path.exists(os.path.dirname(settings))


@needs_unshare
def test_unshare_without_an_original_leaves_nothing_behind(project: Path, fakebin: Path) -> None:
    env, capture = _setup(project, fakebin)
    out = charter("launch", "gemini", "rev", "--run-mode", "unshare", cwd=project, env=env)
    assert out.returncode == 0, out.stderr
    assert _record(capture)["overlay"] == "I am rev in gemini.\n"
    assert not (project / "GEMINI.md").exists()


def test_swap_restores_the_original_and_keeps_the_backup_outside_the_repo(
    project: Path, fakebin: Path
) -> None:
    env, capture = _setup(project, fakebin)
    (project / "AGENTS.md").write_text("ORIGINAL\n")
    out = charter(
        "launch", "codex", "rev", "--run-mode", "swap", "--", "exec", "hi", cwd=project, env=env
    )
    assert out.returncode == 0, out.stderr
    rec = _record(capture)
    assert rec["overlay"] == "I am rev in codex.\n"
    assert rec["env"]["AGENT_PERSONA_RUN_MODE"] == "swap"
    assert (project / "AGENTS.md").read_text() == "ORIGINAL\n"
    assert sorted(p.name for p in project.iterdir()) == [".git", ".personas", "AGENTS.md"]
    # No original: the overlay is removed afterwards.
    (project / "AGENTS.md").unlink()
    out = charter("launch", "opencode", "rev", "--run-mode", "swap", cwd=project, env=env)
    assert out.returncode == 0
    assert _record(capture)["overlay"] == "I am rev in opencode.\n"
    assert not (project / "AGENTS.md").exists()


@pytest.mark.parametrize("mode", ["swap", pytest.param("unshare", marks=needs_unshare)])
def test_exit_status_and_stderr_pass_through_and_the_tool_is_not_rerun(
    project: Path, fakebin: Path, mode: str
) -> None:
    count = project.parent / "count"
    env, _ = _setup(
        project,
        fakebin,
        FAKE_CLI_EXIT="7",
        FAKE_CLI_STDERR="boom from the tool",
        FAKE_CLI_COUNT=str(count),
    )
    out = charter("launch", "claude", "rev", "--run-mode", mode, cwd=project, env=env)
    assert out.returncode == 7
    assert out.stderr == "boom from the tool\n"
    assert len(count.read_text().splitlines()) == 1


@pytest.mark.parametrize("mode", ["swap", "unshare"])
def test_missing_binary_is_reported_and_nothing_is_left(
    project: Path, tmp_path: Path, mode: str
) -> None:
    """Same error in every run mode (unshare used to print `charter-ns: exec: ...`)."""
    make_persona(project / ".personas", "rev", policy=POLICY)
    empty = tmp_path / "empty"
    empty.mkdir()
    env = env_with(PATH=f"{empty}:/usr/bin:/bin")
    out = charter("launch", "claude", "rev", "--run-mode", mode, cwd=project, env=env)
    assert out.returncode == 127, out.stderr
    assert out.stderr.startswith("charter: claude: command not found (install "), out.stderr
    assert "charter-ns" not in out.stderr
    assert not (project / "CLAUDE.md").exists()


@pytest.mark.parametrize("mode", ["swap", "unshare"])
def test_non_executable_binary_is_reported_before_any_swap(
    project: Path, tmp_path: Path, mode: str
) -> None:
    make_persona(project / ".personas", "rev", policy=POLICY)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "claude").write_text("#!/bin/sh\necho ran\n")
    (bindir / "claude").chmod(0o644)
    (project / "CLAUDE.md").write_text("ORIGINAL\n")
    env = env_with(PATH=f"{bindir}:/usr/bin:/bin")
    out = charter("launch", "claude", "rev", "--run-mode", mode, cwd=project, env=env)
    assert out.returncode == 126, out.stderr
    assert f"claude: {bindir / 'claude'} is not executable" in out.stderr
    assert "ran" not in out.stdout
    assert (project / "CLAUDE.md").read_text() == "ORIGINAL\n"


def _start(project: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "charter", "launch", *args],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_ready(capture: Path, proc: subprocess.Popen[str]) -> dict[str, Any]:
    ready = Path(str(capture) + ".ready")
    for _ in range(600):
        if ready.exists() and capture.exists():
            return _record(capture)
        if proc.poll() is not None:
            raise AssertionError(f"launcher ended early: {proc.communicate()}")
        time.sleep(0.05)
    raise AssertionError("the fake tool never started")


@pytest.mark.parametrize(
    ("mode", "sig"),
    [
        ("swap", signal.SIGTERM),
        ("swap", signal.SIGINT),
        pytest.param("unshare", signal.SIGTERM, marks=needs_unshare),
    ],
)
def test_signals_reach_the_tool_and_everything_is_cleaned_up(
    project: Path, fakebin: Path, mode: str, sig: signal.Signals
) -> None:
    env, capture = _setup(project, fakebin, FAKE_CLI_SLEEP="60")
    (project / "CLAUDE.md").write_text("ORIGINAL\n")
    proc = _start(project, env, "claude", "rev", "--run-mode", mode)
    rec = _wait_ready(capture, proc)
    (settings,) = _temp_paths(rec)
    assert os.path.exists(settings)
    proc.send_signal(sig)
    proc.communicate(timeout=30)
    assert proc.returncode == -sig  # the tool died of it; so does the launcher
    assert (project / "CLAUDE.md").read_text() == "ORIGINAL\n"
    assert not os.path.exists(os.path.dirname(settings))
    with pytest.raises(ProcessLookupError):
        os.kill(rec["pid"], 0)


def test_two_swap_launches_in_one_directory_cannot_lose_the_original(
    project: Path, fakebin: Path
) -> None:
    env, capture = _setup(project, fakebin, FAKE_CLI_SLEEP="60")
    (project / "CLAUDE.md").write_text("ORIGINAL\n")
    first = _start(project, env, "claude", "rev", "--run-mode", "swap")
    _wait_ready(capture, first)
    assert (project / "CLAUDE.md").read_text() == "I am rev in claude.\n"
    second = charter(
        "launch",
        "claude",
        "rev",
        "--run-mode",
        "swap",
        cwd=project,
        env={**env, "FAKE_CLI_SLEEP": "0"},
    )
    assert second.returncode == 75
    assert "another charter launch is using" in second.stderr
    first.send_signal(signal.SIGTERM)
    first.communicate(timeout=30)
    assert (project / "CLAUDE.md").read_text() == "ORIGINAL\n"


def _slot_files(env: dict[str, str]) -> list[str]:
    from charter.launch.swap import state_dir

    base = state_dir(env)
    return sorted(n for n in os.listdir(base) if n != "guard.lock") if os.path.isdir(base) else []


@needs_unshare
@pytest.mark.parametrize("original", [True, False])
def test_overlapping_unshare_launches_keep_their_overlay_until_the_last_ends(
    project: Path, fakebin: Path, original: bool
) -> None:
    """The first launch's exit used to remove the placeholder under the second's mount."""
    env, capture = _setup(project, fakebin, FAKE_CLI_SLEEP="60")
    if original:
        (project / "CLAUDE.md").write_text("ORIGINAL\n")
    first = _start(project, env, "claude", "rev", "--run-mode", "unshare")
    _wait_ready(capture, first)
    capture2 = project.parent / "capture2.json"
    second = _start(
        project,
        {**env, "FAKE_CLI_CAPTURE": str(capture2), "FAKE_CLI_SLEEP": "3"},
        "claude",
        "rev",
        "--run-mode",
        "unshare",
    )
    assert _wait_ready(capture2, second)["overlay"] == "I am rev in claude.\n"
    first.send_signal(signal.SIGTERM)
    first.communicate(timeout=30)
    # the first one is gone; the placeholder (or the original) stays for the second
    assert (project / "CLAUDE.md").exists()
    # a swap launch is refused while an unshare launch holds the target
    swap = charter(
        "launch",
        "claude",
        "rev",
        "--run-mode",
        "swap",
        cwd=project,
        env={**env, "FAKE_CLI_SLEEP": "0"},
    )
    assert swap.returncode == 75 and "is using" in swap.stderr, swap.stderr
    _out, err = second.communicate(timeout=30)
    assert second.returncode == 0, err
    end = json.loads(Path(str(capture2) + ".end").read_text())
    assert end["overlay"] == "I am rev in claude.\n"  # the bind mount survived
    if original:
        assert (project / "CLAUDE.md").read_text() == "ORIGINAL\n"
    else:
        assert not (project / "CLAUDE.md").exists()
    assert _slot_files(env) == []  # no lock file, journal or backup left


@needs_unshare
def test_unshare_is_refused_while_a_swap_launch_holds_the_target(
    project: Path, fakebin: Path
) -> None:
    env, capture = _setup(project, fakebin, FAKE_CLI_SLEEP="60")
    (project / "CLAUDE.md").write_text("ORIGINAL\n")
    first = _start(project, env, "claude", "rev", "--run-mode", "swap")
    _wait_ready(capture, first)
    out = charter(
        "launch",
        "claude",
        "rev",
        "--run-mode",
        "unshare",
        cwd=project,
        env={**env, "FAKE_CLI_SLEEP": "0"},
    )
    assert out.returncode == 75 and "swap-mode charter launch is using" in out.stderr
    first.send_signal(signal.SIGTERM)
    first.communicate(timeout=30)
    assert (project / "CLAUDE.md").read_text() == "ORIGINAL\n"
    assert _slot_files(env) == []


@pytest.mark.parametrize("mode", ["swap", pytest.param("unshare", marks=needs_unshare)])
def test_any_launch_restores_what_a_killed_swap_launch_left(
    project: Path, fakebin: Path, mode: str
) -> None:
    env, capture = _setup(project, fakebin, FAKE_CLI_SLEEP="60")
    (project / "CLAUDE.md").write_text("ORIGINAL\n")
    proc = _start(project, env, "claude", "rev", "--run-mode", "swap")
    rec = _wait_ready(capture, proc)
    proc.kill()
    proc.wait(timeout=30)
    os.kill(rec["pid"], signal.SIGKILL)
    proc.communicate(timeout=30)
    assert (project / "CLAUDE.md").read_text() == "I am rev in claude.\n"
    assert _slot_files(env) != []
    capture2 = project.parent / "capture2.json"
    out = charter(
        "launch",
        "claude",
        "rev",
        "--run-mode",
        mode,
        cwd=project,
        env={**env, "FAKE_CLI_SLEEP": "0", "FAKE_CLI_CAPTURE": str(capture2)},
    )
    assert out.returncode == 0, out.stderr
    assert "left swapped by a launch that died" in out.stderr
    assert _record(capture2)["overlay"] == "I am rev in claude.\n"
    assert (project / "CLAUDE.md").read_text() == "ORIGINAL\n"
    assert _slot_files(env) == []  # the stale lock file went too


def test_the_overlay_goes_to_the_repository_root_not_the_subdirectory(
    project: Path, fakebin: Path
) -> None:
    env, capture = _setup(project, fakebin, FAKE_CLI_SLEEP="60")
    sub = project / "pkg" / "deep"
    sub.mkdir(parents=True)
    (project / "CLAUDE.md").write_text("ORIGINAL\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "charter", "launch", "claude", "rev", "--run-mode", "swap"],
        cwd=sub,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    rec = _wait_ready(capture, proc)
    assert rec["cwd"] == str(sub.resolve())
    assert (project / "CLAUDE.md").read_text() == "I am rev in claude.\n"
    assert not (sub / "CLAUDE.md").exists()
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert (project / "CLAUDE.md").read_text() == "ORIGINAL\n"


@pytest.mark.parametrize("original", [True, False])
def test_crash_then_recover(project: Path, fakebin: Path, original: bool) -> None:
    env, capture = _setup(project, fakebin, FAKE_CLI_SLEEP="60")
    if original:
        (project / "CLAUDE.md").write_text("ORIGINAL\n")
    proc = _start(project, env, "claude", "rev", "--run-mode", "swap")
    rec = _wait_ready(capture, proc)
    proc.kill()  # the launcher dies without cleaning up
    proc.wait(timeout=30)
    os.kill(rec["pid"], signal.SIGKILL)
    proc.communicate(timeout=30)
    assert (project / "CLAUDE.md").read_text() == "I am rev in claude.\n"
    out = charter("recover", str(project), "--json", cwd=project, env=env)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    action = "restored the original" if original else "removed the overlay"
    assert data["restored"][0]["action"].startswith(action)
    (settings,) = _temp_paths(rec)
    assert os.path.dirname(settings) in data["temp_dirs_removed"]
    if original:
        assert (project / "CLAUDE.md").read_text() == "ORIGINAL\n"
    else:
        assert not (project / "CLAUDE.md").exists()
    again = charter("recover", cwd=project, env=env)
    assert again.stdout.strip() == "nothing to recover"


def test_a_new_swap_launch_repairs_a_crashed_one_first(project: Path, fakebin: Path) -> None:
    env, capture = _setup(project, fakebin, FAKE_CLI_SLEEP="60")
    (project / "CLAUDE.md").write_text("ORIGINAL\n")
    proc = _start(project, env, "claude", "rev", "--run-mode", "swap")
    rec = _wait_ready(capture, proc)
    proc.kill()
    proc.wait(timeout=30)
    os.kill(rec["pid"], signal.SIGKILL)
    proc.communicate(timeout=30)
    out = charter(
        "launch",
        "claude",
        "rev",
        "--run-mode",
        "swap",
        cwd=project,
        env={**env, "FAKE_CLI_SLEEP": "0"},
    )
    assert out.returncode == 0, out.stderr
    assert (project / "CLAUDE.md").read_text() == "ORIGINAL\n"
    (settings,) = _temp_paths(rec)
    assert os.path.exists(settings)  # the killed launcher's temp dir, until recover
    assert charter("recover", cwd=project, env=env).returncode == 0
    assert not os.path.exists(os.path.dirname(settings))


def test_entry_workflow_run_launches_the_default_tool(project: Path, fakebin: Path) -> None:
    make_persona(project / ".personas", "rev", defaults={"tool": "gemini"})
    capture = project.parent / "capture.json"
    env = env_with(fakebin, FAKE_CLI_CAPTURE=str(capture), CHARTER_RUN_MODE="swap")
    code = "import json, charter.launch as l; print(json.dumps(l.run('rev')))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"tool": "gemini", "persona": "rev", "exit_code": 0}
    assert _record(capture)["env"]["AGENT_PERSONA_TOOL"] == "gemini"
    from charter.manifest import FOLDER_ENTRY_WORKFLOW

    assert FOLDER_ENTRY_WORKFLOW == "charter.launch:run"


def test_doctor_reports_clis_namespaces_and_personas(project: Path, fakebin: Path) -> None:
    make_persona(project / ".personas", "rev")
    out = charter("doctor", "--json", cwd=project, env=env_with(fakebin))
    checks = {c["check"]: c for c in json.loads(out.stdout)}
    assert {
        "cli:claude",
        "cli:codex",
        "cli:gemini",
        "cli:opencode",
        "unshare",
        "bubblewrap",
        "persona folders",
        "personas valid",
    } <= set(checks)
    assert "1 persona(s)" in checks["persona folders"]["detail"]


@needs_unshare
@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to switch to nobody"
)
def test_unshare_as_an_unprivileged_user_maps_back_to_the_real_uid() -> None:
    """Not root: a root-mapped user namespace for the bind mount, then a nested one that
    maps back to the real uid, so the tool runs as the user who launched it."""
    work = Path(tempfile.mkdtemp(prefix="charter-ns-test-"))  # pytest's tmp is root-only
    try:
        _unprivileged(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _unprivileged(work: Path) -> None:
    work.chmod(0o777)
    (work / "CLAUDE.md").write_text("ORIGINAL\n")
    (work / "overlay.md").write_text("OVERLAY\n")
    for f in work.iterdir():
        f.chmod(0o644)
    code = (
        "import subprocess, sys\n"
        "from charter.launch.runner import namespace_argv, unshare_works\n"
        "assert unshare_works()\n"
        f"argv = namespace_argv({str(work / 'overlay.md')!r}, {str(work / 'CLAUDE.md')!r},"
        " ['sh', '-c', 'id -u; cat CLAUDE.md'])\n"
        f"sys.exit(subprocess.run(argv, cwd={str(work)!r}).returncode)\n"
    )
    out = subprocess.run(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--",
            sys.executable,
            "-c",
            code,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if "Operation not permitted" in out.stderr or "unshare failed" in out.stderr:
        pytest.skip(f"unprivileged user namespaces are disabled here: {out.stderr.strip()}")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["65534", "OVERLAY"]
    assert (work / "CLAUDE.md").read_text() == "ORIGINAL\n"
