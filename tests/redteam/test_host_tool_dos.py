"""Class 9 (issue 29): denial of service and data loss by input.

A FIFO, a catastrophic regular expression, a dangling ``.env`` link left by one call, a
``write`` whose content cannot be written: none may hang the loop, break later calls or
leave a file half-written. Each hostile case has an allowed twin.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from .conftest import run_loop, tc

POLICY: dict[str, Any] = {"paths": {"allow": ["./"], "deny": ["./secrets/**"]}}
SHELL_POLICY: dict[str, Any] = {
    "commands": {"allow": ["cat:*", "ln:*", "python3:*", "ls:*"]},
    "paths": {"allow": ["./"], "deny": ["./secrets/**"]},
    "network": {"deny": ["*"]},
}


def bounded(ws: Path, policy: dict[str, Any], *turns: dict[str, Any], **kw: Any) -> list[str]:
    """``run_loop`` on a thread: a hang fails the test instead of stalling the suite."""
    out: list[list[str]] = []
    worker = threading.Thread(target=lambda: out.append(run_loop(ws, policy, *turns, **kw)))
    worker.daemon = True
    worker.start()
    worker.join(120)
    assert out, "the agent loop hung"
    return out[0]


def test_fifo_is_refused_not_waited_on(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    obs = bounded(
        ws,
        POLICY,
        tc("read", path="pipe"),
        tc("grep", pattern="x", path="pipe"),
        tc("write", path="pipe", content="x"),
        tc("edit", path="pipe", old_string="a", new_string="b"),
        tc("grep", pattern="public"),  # a FIFO met while walking is skipped, not opened
        tc("read", path="notes.txt"),
    )
    for hostile in obs[:4]:
        assert "FIFO" in hostile, hostile
    assert "notes.txt:1:public notes" in obs[4]
    assert obs[5] == "public notes"
    assert (ws / "pipe").is_fifo()


def test_catastrophic_pattern_runs_in_linear_time(ws: Path) -> None:
    (ws / "evil.txt").write_text("a" * 5000 + "!\n")
    obs = bounded(
        ws,
        POLICY,
        tc("grep", pattern="(a+)+$", path="evil.txt"),
        tc("grep", pattern="(x+x+)+y"),
        tc("grep", pattern=r"(a)\1"),  # RE2 has no backreferences: a clear error
        tc("grep", pattern="a{3}!", path="evil.txt"),
    )
    assert obs[0] == "[]" and obs[1] == "[]"
    assert "invalid grep pattern" in obs[2] and "RE2" in obs[2]
    assert obs[3].startswith('["evil.txt:1:aaa')


def test_walks_stop_at_their_deadline(ws: Path) -> None:
    for i in range(30):
        (ws / f"f{i}.txt").write_text("x\n")
    ticks = iter(range(10**6))
    obs = run_loop(
        ws,
        POLICY,
        tc("grep", pattern="x"),
        tc("glob", pattern="**/*"),
        tool_options={"tool_timeout_s": 10, "clock": lambda: float(next(ticks))},
    )
    assert "grep exceeded its deadline of 10 s" in obs[0]
    assert "glob exceeded its deadline of 10 s" in obs[1]
    twin = run_loop(ws, POLICY, tc("grep", pattern="x", path="f1.txt"))
    assert twin == ['["f1.txt:1:x"]']


def test_write_validates_before_touching_and_never_half_writes(ws: Path) -> None:
    keep = ws / "keep.txt"
    keep.write_text("original\n")
    os.chmod(keep, 0o640)
    obs = run_loop(
        ws,
        POLICY,
        tc("write", path="keep.txt", content=None),
        tc("write", path="keep.txt", content="half \ud800 written"),  # unencodable
        tc("edit", path="keep.txt", old_string="original", new_string=None),
        tc("edit", path="keep.txt", old_string="original", new_string="x\udfff"),
        tc("write", path="new/dir/made.txt", content=7),
    )
    for hostile in obs:
        assert "error" in hostile, hostile
    assert keep.read_text() == "original\n"
    assert not (ws / "new").exists()
    assert [p.name for p in ws.iterdir() if "charter-tmp" in p.name] == []
    twin = run_loop(
        ws,
        POLICY,
        tc("edit", path="keep.txt", old_string="original", new_string="edited"),
        tc("write", path="new/dir/made.txt", content="made"),
    )
    assert all('"status": "ok"' in o for o in twin), twin
    assert keep.read_text() == "edited\n"
    assert keep.stat().st_mode & 0o777 == 0o640  # the rename kept the file's mode
    assert (ws / "new" / "dir" / "made.txt").read_text() == "made"


LINKS = "import os; os.symlink('/nonexistent/x', '.env'); os.symlink('/nonexistent/y', 'c.pem')"
DIR_LINK = "import os; os.symlink('src', '.env.d')"
READ_ENV = "print(open('.env').read())"


@pytest.mark.needs_sandbox
def test_dangling_env_link_left_by_one_call_does_not_break_the_next(ws: Path) -> None:
    obs = bounded(
        ws,
        SHELL_POLICY,
        # (``ln -s ... .env`` names a sensitive path and is refused by the policy; an
        # interpreter's links are the sandbox's to live with)
        tc("bash", command=f"python3 -c {LINKS!r}"),
        tc("bash", command="cat notes.txt"),
        tc("bash", command=f"python3 -c {DIR_LINK!r}; cat notes.txt"),
        tc("bash", command="cat notes.txt"),
    )
    assert (ws / ".env").is_symlink() and (ws / ".env.d").is_symlink()
    assert '"exit_code": 0' in obs[1] and "public notes" in obs[1], obs[1]
    assert "public notes" in obs[3], obs[3]
    # the twin: a real .env is still masked
    (ws / ".env").unlink()
    (ws / ".env").write_text("API_KEY=sk-hidden\n")
    masked = bounded(
        ws, SHELL_POLICY, tc("bash", command=f"python3 -c {READ_ENV!r}; cat notes.txt")
    )
    assert "sk-hidden" not in masked[0] and "public notes" in masked[0]


def test_ask_user_has_a_deadline_when_given_one(ws: Path) -> None:
    import asyncio

    from charter.agent import MockProvider, agent_loop, builtin_tools

    from .conftest import observations

    async def never(question: str) -> str:
        await asyncio.sleep(3600)
        return "late"

    def blocking(question: str) -> str:
        threading.Event().wait(3600)
        return "late"

    for answerer in (never, blocking):
        tools = builtin_tools(
            str(ws), ask_user=answerer, ask_user_timeout_s=0.2, names=("ask_user",)
        )
        provider = MockProvider([tc("ask_user", question="ok?"), "done"])
        obs = observations(agent_loop("x", provider=provider, tools=tools, workspace=str(ws)))
        assert "no answer from the user within 0.2 s" in obs[0], obs
    twin = builtin_tools(
        str(ws), ask_user=lambda q: "yes", ask_user_timeout_s=5, names=("ask_user",)
    )
    provider = MockProvider([tc("ask_user", question="ok?"), "done"])
    assert observations(agent_loop("x", provider=provider, tools=twin, workspace=str(ws))) == [
        "yes"
    ]
