"""Which hooks a loop gets: the one place option values become :class:`LoopHook` s."""

from __future__ import annotations

import contextlib
from typing import Any

from .approvals import approvals_hook
from .delegation import skill_tool
from .narrowing import narrowing_hook, progress_hook
from .skills import skills_hook
from .tools import Tool


async def install_extensions(run: Any, tools: list[Tool], stack: contextlib.AsyncExitStack) -> None:
    """Add the hooks (and their tools) the options ask for, then start them."""
    options = run.cfg.options
    approvals = approvals_hook(options)
    if approvals is not None:
        run.hooks.add(approvals)
    skills = skills_hook(options)
    if skills is not None:
        run.hooks.add(skills)
        tools.append(skill_tool(skills.registry, skills))
    progress = progress_hook(options.get("progress_tool"))
    if progress is not None:
        run.hooks.add(progress)
        tools.append(progress.tool())
    narrowing = narrowing_hook(options.get("tool_surface_narrowing"))
    if narrowing is not None:
        run.hooks.add(narrowing)
    run.all_tools = tools
    await run.hooks.on_start(run, stack)
