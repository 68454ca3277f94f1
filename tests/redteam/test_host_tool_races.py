"""Class 5 (issue 29): decide-then-open races in the host-side file tools.

A flipper thread swaps a symlink (and a directory) between a public file and a denied one
as fast as it can while the scripted model runs ``read``/``grep``/``glob``/``edit`` on it,
several calls at a time (``max_concurrent_tools > 1``). The denied content must never reach
the model, nor may the denied file be written, over hundreds of attempts.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import many, run_loop, tc

POLICY: dict[str, Any] = {"paths": {"allow": ["./"], "deny": ["./secrets/**"]}}


class Flipper:
    """Swaps ``link`` (a file link) and ``d`` (a directory link) atomically, forever."""

    def __init__(self, ws: Path) -> None:
        self.ws = ws
        self.stop = threading.Event()
        self.flips = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _swap(self, name: str, target: str) -> None:
        tmp = self.ws / f".{name}.tmp"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(target)
        os.replace(tmp, self.ws / name)  # atomic: the name always exists

    def _run(self) -> None:
        while not self.stop.is_set():
            for file_target, dir_target in (("src/a.txt", "src"), ("secrets/token.txt", "secrets")):
                self._swap("link", file_target)
                self._swap("d", dir_target)
                self.flips += 1


@pytest.fixture
def flipper(ws: Path) -> Iterator[Flipper]:
    f = Flipper(ws)
    f._swap("link", "src/a.txt")
    f._swap("d", "src")
    f.thread.start()
    yield f
    f.stop.set()
    f.thread.join()


ROUND = many(
    ("read", {"path": "link"}),
    ("read", {"path": "d/a.txt"}),
    ("grep", {"pattern": "TOKEN|hello", "path": "."}),
    ("grep", {"pattern": "TOKEN|hello", "path": "link"}),
    ("grep", {"pattern": "TOKEN|hello", "path": "d"}),
    ("glob", {"pattern": "**/*", "path": "d"}),
    ("edit", {"path": "link", "old_string": "TOKEN", "new_string": "PWNED"}),
    ("edit", {"path": "d/a.txt", "old_string": "TOKEN", "new_string": "PWNED"}),
)


def test_symlink_flipper_never_gets_denied_content_to_the_model(ws: Path, flipper: Flipper) -> None:
    rounds = 40
    obs = run_loop(ws, POLICY, *([ROUND] * rounds), max_concurrent_tools=4)
    assert len(obs) == rounds * 8
    assert flipper.flips > 100  # the race really ran
    leaked = [o for o in obs if "hunter2" in o]
    assert leaked == [], f"{len(leaked)} of {len(obs)} calls leaked: {leaked[:3]}"
    # nor was the denied file written through the flipping names
    assert (ws / "secrets" / "token.txt").read_text() == "TOKEN=hunter2\n"
    assert (ws / "secrets" / "a.txt").read_text() == "TOKEN=hunter2\n"


def test_allowed_twin_reads_searches_and_edits_through_a_stable_link(ws: Path) -> None:
    (ws / "link").symlink_to("src/a.txt")
    (ws / "d").symlink_to("src")
    obs = run_loop(
        ws,
        POLICY,
        many(("read", {"path": "link"}), ("read", {"path": "d/a.txt"})),
        many(("grep", {"pattern": "hel+o", "path": "d"}), ("grep", {"pattern": "hel+o"})),
        tc("glob", pattern="**/*.txt"),
        tc("edit", path="link", old_string="hello", new_string="howdy"),
        max_concurrent_tools=4,
    )
    assert obs[0] == "hello" and obs[1] == "hello"
    assert "a.txt:1:hello" in obs[2] and "src/a.txt:1:hello" in obs[3]
    assert "notes.txt" in obs[4] and "src/a.txt" in obs[4] and "secrets" not in obs[4]
    assert '"status": "ok"' in obs[5]
    assert (ws / "src" / "a.txt").read_text() == "howdy\n"
    assert (ws / "link").is_symlink()  # the link was followed by the decision, not replaced
