"""A daemon agent: it idles between events and wakes on triggers from anywhere.

Run: python examples/agents/daemon_watch.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from _provider import choose

from charter.agent import daemon_snapshot, daemon_spawn, daemon_stop, daemon_trigger

path = Path(tempfile.mkdtemp()) / "reviewer"
provider, model = choose([], default="Summarised the change.")
handle = daemon_spawn(
    {
        "name": "reviewer",
        "task": "Watch for trigger events and summarize the latest change.",
        "system": "You are a careful reviewer.",
        "provider": provider,
        "model": model,
        "persist_path": str(path),
        "event_queue_capacity": 16,
    }
)
while daemon_snapshot(handle)["state"] != "idle":
    time.sleep(0.02)
daemon_trigger(handle, {"kind": "file_changed", "path": "src/lib.rs"})
deadline = time.monotonic() + 30
while daemon_snapshot(handle)["pending_event_count"] and time.monotonic() < deadline:
    time.sleep(0.02)
while daemon_snapshot(handle)["state"] != "idle":
    time.sleep(0.02)
result = daemon_stop(handle)
print("pending events:", daemon_snapshot(handle)["pending_event_count"])
print("final state:", result.to_dict()["daemon_state"], result.stop_reason)
print("snapshot saved:", Path(result.to_dict()["daemon_snapshot_path"]).exists())
