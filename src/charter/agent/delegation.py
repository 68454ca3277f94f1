"""Skill activation and delegation: two of seed 002's four dispatch points.

Both tools are decided like any other call (their ``skill_args`` / ``member_args``
annotations put the skill and the delegation target under the policy), and the handlers
decide the resource again with :func:`charter.policy.decide_current_resource` at the
point of activation / delegation, so a tool wired differently cannot bypass it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from charter.policy import BUILTIN_TOOLS, decide_current_resource
from charter.policy.names import canonical_name

from .skills import Skill, SkillsHook, as_registry
from .tools import Tool

__all__ = ["Skill", "delegate_tool", "skill_tool"]


def skill_tool(skills: Any, active: Any) -> Tool:
    """The ``skill`` tool: the model activates a skill by name.

    ``active`` is the run's :class:`~charter.agent.skills.SkillsHook` (activation, its
    events and its policy frame apply before the next model call) or, for callers
    outside a loop, a plain list the skill is appended to.
    """
    registry = as_registry(skills)

    def skill(name: str) -> dict[str, Any]:
        decision = decide_current_resource("skills", name)
        if not decision.allowed:
            return decision.permission_denied()
        found = registry.get(name)
        if found is None:
            return {
                "status": "error",
                "error": f"unknown skill '{name}'",
                "available": registry.names(),
            }
        if isinstance(active, SkillsHook):
            active.request(found)
        elif found not in active:
            active.append(found)
        return {"status": "ok", "activated": found.name}

    listing = ", ".join(f"{s.name} ({s.description})" for s in registry)
    return Tool(
        name="skill",
        handler=skill,
        description=f"Activate a skill by name. Skills: {listing}",
        parameters={
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        },
        annotations=BUILTIN_TOOLS["skill"],
    )


Member = Callable[[str], Any] | Mapping[str, Any]


def delegate_tool(members: Mapping[str, Member]) -> Tool:
    """The ``delegate`` tool: hand a task to a member (a callable or agent_loop options).

    A member given as options (``agent_loop`` options plus the sub-agent keys
    ``token_budget``, ``allowed_tools``, ``policy``, ``system``, ...) runs like
    ``sub_agent_run``: in the current context, so the parent's policy stack is its
    ceiling, with its token budget reserved from the parent's remainder.
    """
    registry = {canonical_name(k): v for k, v in members.items()}

    async def delegate(member: str, task: str) -> Any:
        decision = decide_current_resource("members", member)
        if not decision.allowed:
            return decision.permission_denied()
        target = registry.get(canonical_name(member))
        if target is None:
            return {
                "status": "error",
                "error": f"unknown member '{member}'",
                "available": sorted(registry),
            }
        if callable(target):
            out = target(task)
            if inspect.isawaitable(out):
                out = await out
            return {"status": "ok", "member": member, "result": out}
        from .subagents import run_request, sub_agent_request

        # a member is a sub-agent: its token budget is reserved from this agent's
        # remainder before it runs, and its request is pushed as a sub_agent frame
        opts = {"name": member, **target}
        env = await run_request(sub_agent_request(task, **opts))
        out = {
            "status": "ok" if env["ok"] else env["status"],
            "member": member,
            "result": env["summary"],
            "child_status": env["status"],
            "tools": env["tools"],
            "tokens_used": env["tokens_used"],
            "token_budget": env["token_budget"],
        }
        if "error" in env:
            out["error"] = env["error"]
        return out

    return Tool(
        name="delegate",
        handler=delegate,
        description="Delegate a task to a team member. Members: " + ", ".join(sorted(registry)),
        parameters={
            "type": "object",
            "properties": {"member": {"type": "string"}, "task": {"type": "string"}},
            "required": ["member", "task"],
        },
        annotations=BUILTIN_TOOLS["delegate"],
        is_async=True,
    )
