"""Run one command under the active policy stack's sandbox (the ``bash`` tool's path).

Custom tools that execute programs (``kind = "execute"``) opt in by calling
:func:`run_command` instead of spawning processes themselves: same profile, same proxy,
same fail-closed rule, same receipt as the built-in ``bash`` tool.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from typing import Any

from charter.policy import current_stack

from .receipt import SandboxUnavailable
from .runner import sandbox_for
from .tracked import tracked_denied, tracked_note

#: Variables that make bash (or sh) run a file before the command: never inherited.
SHELL_STARTUP_VARS = frozenset({"BASH_ENV", "ENV"})
#: The integrations' credentials (charter.tools): they stay in the charter process, so an
#: unsandboxed command does not inherit them either (a sandboxed one starts clean).
CREDENTIAL_VARS = frozenset(
    {
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "GITHUB_APP_PRIVATE_KEY",
        "SLACK_BOT_TOKEN",
        "PAGERDUTY_TOKEN",
        "PAGERDUTY_ROUTING_KEY",
    }
)
_MAX_OUTPUT = 200_000


async def run_command(
    argv: Sequence[str],
    *,
    workspace: str,
    timeout_s: float = 120.0,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Run ``argv`` in ``workspace`` inside the sandbox the active policy stack needs.

    Returns ``{"status", "exit_code", "stdout", "stderr"}`` plus ``"sandbox"`` (a
    :class:`~charter.sandbox.SandboxReceipt` as a dict) when it ran sandboxed. When the
    stack restricts paths or network and no sandbox can be made, nothing runs and the
    result is ``{"status": "error", "error", "receipt"}`` (a
    :class:`~charter.sandbox.SandboxUnavailable`). ``env`` adds variables inside the
    sandbox (whose environment is otherwise clean); unsandboxed, the command inherits
    charter's environment minus :data:`SHELL_STARTUP_VARS` and :data:`CREDENTIAL_VARS`.
    """
    box = sandbox_for(current_stack(), workspace)
    if isinstance(box, SandboxUnavailable):
        return {"status": "error", "error": box.message, "receipt": box.to_dict()}
    command = list(argv)
    child_env = {
        k: v
        for k, v in os.environ.items()
        if k not in SHELL_STARTUP_VARS and k not in CREDENTIAL_VARS
    }
    wrapped = None
    timed_out = False
    out = err = b""
    if box is not None:
        box.start()
        command = wrapped = box.wrap(command, cwd=workspace, env=box.env(env))
    elif env:
        child_env.update(env)
    try:
        try:
            proc = await asyncio.create_subprocess_exec(
                *command,
                cwd=workspace,
                env=child_env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=wrapped.pass_fds if wrapped is not None else (),
            )
        finally:
            if wrapped is not None:
                wrapped.close()  # bubblewrap holds its own copy
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            timed_out = True
    finally:
        if box is not None:
            box.stop()
            box.take_planted()
    if timed_out:  # what the sandbox moved aside is reported all the same
        stopped: dict[str, Any] = {"status": "error", "error": f"timed out after {timeout_s}s"}
        if box is not None:
            stopped["sandbox"] = box.receipt(None).to_dict()
        return stopped
    stderr = err.decode("utf-8", "replace")
    result: dict[str, Any] = {
        "status": "ok" if proc.returncode == 0 else "error",
        "exit_code": proc.returncode,
        "stdout": out.decode("utf-8", "replace")[-_MAX_OUTPUT:],
        "stderr": stderr[-_MAX_OUTPUT:],
    }
    if box is not None:
        receipt = box.receipt(proc.returncode, stderr).to_dict()
        # a denied file git tracks is readable from the object store: say so (issue 29)
        denied = tracked_denied(current_stack(), workspace)
        if denied:
            receipt["notes"].append(tracked_note(denied))
        result["sandbox"] = receipt
    return result
