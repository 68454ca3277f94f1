"""charter.launch: start Claude Code, Codex, Gemini CLI or OpenCode under a persona.

The persona's instructions become the CLI's instructions file (composed overlay, swapped
in or bind-mounted), its portable policy is *translated* into what that CLI really
enforces (decisions stay with :mod:`charter.policy`), and every element is reported with
its enforcement strength. Nothing here imports pydantic or a model SDK: ``charter launch``
must start fast.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from charter._lazy import lazy_exports

from .errors import LaunchError

if TYPE_CHECKING:
    from .clis import CLIS, CliSpec, CliTool, Flag, get_cli
    from .overlay import Overlay, OverlayError, compose
    from .plan import LaunchOptions, Plan, build_plan, policy_present
    from .resolve import Resolved, ResolveError, resolve_persona
    from .translate import STRENGTHS, Element, Translation

# Names are imported on first use: the launch cache path must not import charter.policy.
_LAZY = {
    "CLIS": "clis",
    "CliSpec": "clis",
    "CliTool": "clis",
    "Flag": "clis",
    "get_cli": "clis",
    "Overlay": "overlay",
    "OverlayError": "overlay",
    "compose": "overlay",
    "LaunchOptions": "plan",
    "Plan": "plan",
    "build_plan": "plan",
    "policy_present": "plan",
    "Resolved": "resolve",
    "ResolveError": "resolve",
    "resolve_persona": "resolve",
    "STRENGTHS": "translate",
    "Element": "translate",
    "Translation": "translate",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), cache=False)


DEFAULT_TOOL_ENV = "CHARTER_LAUNCH_TOOL"


def launch(opts: LaunchOptions) -> int:
    """Build the plan and run the tool; return its exit status (negative: killed by signal).

    Raises :class:`LaunchError` when the launch cannot go ahead (including a
    ``--strict-policy`` refusal, code 3).
    """
    from .plan import build_plan
    from .render import render_refusal
    from .runner import execute

    plan = build_plan(opts)
    if opts.strict and plan.refusals:
        raise LaunchError(render_refusal(plan.to_dict()), 3)
    return execute(plan.job())


def run(ctx: Any = None, *, tool: str | None = None, args: Sequence[str] = ()) -> dict[str, Any]:
    """Entry workflow of folder personas (``charter.launch:run``): launch the default tool.

    ``ctx`` is a run context (anything with ``.persona`` and optionally ``.workspace``), a
    :class:`~charter.manifest.Persona`, or a persona name. The tool is the persona's
    ``defaults.tool`` in persona.json, else ``$CHARTER_LAUNCH_TOOL``, else ``claude``.
    """
    persona = getattr(ctx, "persona", ctx)
    name = persona if isinstance(persona, str) else getattr(persona, "name", None)
    if not isinstance(name, str):
        raise LaunchError("charter.launch.run needs a persona (a run context, Persona or name)")
    workspace = getattr(ctx, "workspace", None)
    chosen = tool
    instructions = getattr(persona, "instructions", None)
    if chosen is None and instructions is None:
        from .resolve import resolve_persona

        found = resolve_persona(name, cwd=str(workspace) if workspace is not None else None)
        instructions = found.persona.instructions
    if chosen is None and instructions is not None:
        value = instructions.defaults.get("tool")
        chosen = value if isinstance(value, str) else None
    chosen = chosen or os.environ.get(DEFAULT_TOOL_ENV) or "claude"
    from .plan import LaunchOptions

    status = launch(
        LaunchOptions(
            chosen, name, tuple(args), cwd=str(workspace) if workspace is not None else None
        )
    )
    return {"tool": chosen, "persona": name, "exit_code": status}


__all__ = [
    "CLIS",
    "STRENGTHS",
    "CliSpec",
    "CliTool",
    "Element",
    "Flag",
    "LaunchError",
    "LaunchOptions",
    "Overlay",
    "OverlayError",
    "Plan",
    "ResolveError",
    "Resolved",
    "Translation",
    "build_plan",
    "compose",
    "get_cli",
    "launch",
    "policy_present",
    "resolve_persona",
    "run",
]
