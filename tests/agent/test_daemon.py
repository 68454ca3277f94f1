"""Daemon loops: idle, wake sources, watchdog, the handle API, durable triggers."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from charter.agent import AgentOptionError, MockProvider, agent_loop, agent_session_queue_message
from charter.agent.daemon import (
    DaemonQueueFull,
    daemon_resume,
    daemon_snapshot,
    daemon_spawn,
    daemon_stop,
    daemon_trigger,
    pending_events,
    trigger_path,
)


def _texts(provider: MockProvider) -> list[str]:
    return [str(m.get("content")) for r in provider.requests for m in r.messages]


def _wait(predicate: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("timed out")


def test_a_daemon_without_wake_sources_ends_idle() -> None:
    result = agent_loop("watch", provider=MockProvider(["nothing to do"]), daemon=True)
    assert result.status == "idle" and result.stop_reason == "no_wake_source"
    d = result.to_dict()
    assert d["daemon_state"] == "idle" and d["daemon_snapshot_path"] is None


def test_the_watchdog_ends_a_daemon_that_never_wakes(tmp_path: Path) -> None:
    result = agent_loop(
        "watch",
        provider=MockProvider(default="idle"),
        daemon=True,
        watch_paths=[str(tmp_path / "never.txt")],
        idle_watchdog_attempts=3,
    )
    assert result.status == "watchdog" and result.to_dict()["daemon_state"] == "watchdog"


def test_timer_and_file_wakes(tmp_path: Path) -> None:
    provider = MockProvider(default="ok")
    result = agent_loop(
        "tick", provider=provider, daemon=True, wake_interval_ms=20, max_iterations=3
    )
    assert result.status == "budget_exhausted" and result.llm.iterations == 3
    assert _texts(provider).count("[daemon wake: timer]") >= 2

    watched = tmp_path / "config.toml"
    watched.write_text("a")
    provider2 = MockProvider(default="ok")

    def touch(request: Any) -> str:
        if len(provider2.requests) == 1:
            time.sleep(0.05)
            watched.write_text("changed")
        return "ok"

    provider2.default = touch
    agent_loop(
        "watch",
        provider=provider2,
        daemon=True,
        watch_paths=[str(watched)],
        idle_watchdog_attempts=40,
        max_iterations=2,
    )
    assert any("config.toml changed" in t for t in _texts(provider2))


def test_a_queued_human_message_wakes_a_session_daemon(_session_dir: Path) -> None:
    provider = MockProvider(default="noted")

    def first(request: Any) -> str:
        agent_session_queue_message("s-daemon", "please also check the logs")
        return "waiting"

    provider.turns = [first]
    result = agent_loop(
        "watch",
        provider=provider,
        daemon=True,
        session_id="s-daemon",
        idle_watchdog_attempts=5,
        max_iterations=2,
    )
    assert "please also check the logs" in _texts(provider)
    assert result.llm.iterations == 2


def test_spawn_trigger_snapshot_stop(tmp_path: Path) -> None:
    path = tmp_path / "reviewer"
    provider = MockProvider(default="summarized")
    handle = daemon_spawn(
        {
            "name": "reviewer",
            "task": "Watch for trigger events and summarize the latest change.",
            "system": "You are a careful reviewer.",
            "provider": provider,
            "persist_path": str(path),
            "event_queue_capacity": 8,
        }
    )
    _wait(lambda: daemon_snapshot(handle)["state"] == "idle")
    daemon_trigger(handle, {"kind": "file_changed", "path": "src/lib.rs"})
    _wait(lambda: any("src/lib.rs" in t for t in _texts(provider)))
    _wait(lambda: daemon_snapshot(handle)["pending_event_count"] == 0)
    # another process can trigger it too, through its persist_path
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from charter.agent.daemon import daemon_trigger; import sys; "
            "daemon_trigger(sys.argv[1], {'kind': 'pr_opened', 'number': 7})",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    _wait(lambda: any('"number": 7' in t for t in _texts(provider)))
    snap = daemon_snapshot(handle)
    assert snap["name"] == "reviewer" and snap["iterations"] >= 3
    result = daemon_stop(handle)
    assert result.status == "idle" and result.stop_reason == "daemon_stopped"
    assert Path(result.to_dict()["daemon_snapshot_path"]).exists()
    assert pending_events(path) == []


def test_a_trigger_in_flight_when_the_daemon_dies_is_replayed_on_resume(tmp_path: Path) -> None:
    path = tmp_path / "d"
    code = textwrap.dedent(
        """
        import os, sys, time
        from charter.agent import MockProvider
        from charter.agent.daemon import daemon_spawn, daemon_trigger, daemon_snapshot

        def reply(request):
            text = " ".join(str(m.get("content")) for m in request.messages)
            if "deploy-42" in text:
                os._exit(9)  # killed while handling the trigger
            return "idle"

        handle = daemon_spawn({"task": "watch", "provider": MockProvider(default=reply),
                               "persist_path": sys.argv[1]})
        while daemon_snapshot(handle)["state"] != "idle":
            time.sleep(0.01)
        daemon_trigger(handle, {"kind": "deploy", "id": "deploy-42"})
        time.sleep(30)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 9, out.stderr
    assert [e["event"]["id"] for e in pending_events(path)] == ["deploy-42"]
    provider = MockProvider(default="handled")
    handle = daemon_resume(path, provider=provider)
    _wait(lambda: any("deploy-42" in t for t in _texts(provider)))
    _wait(lambda: pending_events(path) == [])
    result = daemon_stop(handle)
    assert result.status == "idle"
    # the resumed daemon kept the conversation it had before the crash
    assert _texts(provider)[0] == "watch"


def test_queue_capacity_and_option_errors(tmp_path: Path) -> None:
    trigger_path(tmp_path, {"kind": "a"}, capacity=1)
    with pytest.raises(DaemonQueueFull):
        trigger_path(tmp_path, {"kind": "b"}, capacity=1)
    with pytest.raises(AgentOptionError, match=r"persist_path.*daemon=True"):
        agent_loop("x", persist_path=str(tmp_path))
    with pytest.raises(AgentOptionError, match="wake_interval_ms"):
        agent_loop("x", daemon=True, wake_interval_ms=0)
    with pytest.raises(AgentOptionError, match="resume_path"):
        agent_loop("x", daemon=True, resume_path=str(tmp_path / "none"))
    with pytest.raises(AgentOptionError, match="persist_path"):
        daemon_spawn({"task": "x"})
    assert os.path.exists(tmp_path / "events.jsonl")


def test_a_trigger_by_path_honours_the_queue_capacity(tmp_path: Path) -> None:
    path = tmp_path / "bounded"
    handle = daemon_spawn(
        {
            "task": "watch",
            "provider": MockProvider(default="ok"),
            "persist_path": str(path),
            "event_queue_capacity": 1,
        }
    )
    _wait(lambda: daemon_snapshot(handle)["state"] == "idle")
    daemon_stop(handle)  # stopped: nothing consumes the queue now
    script = (
        "import sys\n"
        "from charter.agent.daemon import DaemonQueueFull, daemon_trigger\n"
        "try:\n"
        "    daemon_trigger(sys.argv[1], {'kind': 'pr_opened'})\n"
        "except DaemonQueueFull as exc:\n"
        "    print('full:', exc)\n"
    )

    def trigger() -> str:
        out = subprocess.run(
            [sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stderr
        return out.stdout

    assert trigger() == ""  # the first fits
    assert "full: " in trigger() and "1 events" in trigger()  # the others are refused
    assert len(pending_events(path)) == 1  # the effect: the queue never grew past 1
