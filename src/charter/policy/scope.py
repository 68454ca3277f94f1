"""Agent scoping (seed 002) as a constructor of canonical policies.

``AgentScope`` keeps the RFC's vocabulary (empty list = unrestricted, except
``members``: empty = no delegation) but does not decide anything itself: it produces
a :class:`Policy` that the one engine enforces, and the ``<scope>`` prompt block.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import PathRules, Policy, Rules
from .names import canonical_name

BASE_TOOLS: tuple[str, ...] = ("bash", "ask_user")
MEMORY_TOOLS: tuple[str, ...] = ("recall", "remember", "memory", "forget")
SKILL_TOOL = "skill"
MCP_TOOL = "mcp"
DELEGATE_TOOL = "delegate"


def _norm(items: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(canonical_name(i) for i in items if i.strip()))


@dataclass(frozen=True)
class AgentScope:
    """Whitelist scoping for an agent: tools, delegation members, skills and MCP servers."""

    tools: tuple[str, ...] = ()
    members: tuple[str, ...] = ()
    skills: tuple[str, ...] = ()
    mcps: tuple[str, ...] = ()
    memory: bool = False

    def __post_init__(self) -> None:
        for name in ("tools", "members", "skills", "mcps"):
            object.__setattr__(self, name, _norm(getattr(self, name)))

    @property
    def scoped(self) -> bool:
        """True when skills, MCP servers or members are scoped (the RFC's trigger)."""
        return bool(self.skills or self.mcps or self.members)

    def whitelist(self) -> tuple[str, ...] | None:
        """The tool whitelist, or ``None`` when tools are unrestricted.

        With skills/mcps/members scoping, the RFC's computed whitelist (BASE_TOOLS, memory
        tools, then ``skill`` / ``mcp`` / ``delegate`` as applicable) is used; explicitly
        listed ``tools`` are kept as well rather than silently dropped.
        """
        if not self.scoped:
            return self.tools or None
        names: list[str] = list(BASE_TOOLS)
        if self.memory:
            names.extend(MEMORY_TOOLS)
        if self.skills:
            names.append(SKILL_TOOL)
        if self.mcps:
            names.append(MCP_TOOL)
        if self.members:
            names.append(DELEGATE_TOOL)
        names.extend(self.tools)
        return tuple(dict.fromkeys(names))

    def policy(self, name: str | None = None) -> Policy:
        """The canonical policy this scope stands for."""
        whitelist = self.whitelist()
        tools = Rules()
        if whitelist is not None:
            # MCP tools are ``server__tool``: an allowed server's tools are visible.
            allowed = (*whitelist, *(f"{m}__*" for m in self.mcps))
            tools = Rules((tuple(dict.fromkeys(allowed)),))
        return Policy(
            tools=tools,
            paths=PathRules(),
            skills=Rules((self.skills,)) if self.skills else Rules(),
            mcp_servers=Rules((self.mcps,)) if self.mcps else Rules(),
            members=Rules((self.members,)),  # empty = no delegation
            name=name,
        )

    def prompt_block(self) -> str:
        """The ``<scope>`` block appended to the system prompt ("" when nothing is scoped)."""
        lines: list[str] = []
        if self.tools:
            lines.append("tools: " + ", ".join(self.whitelist() or self.tools))
        if self.skills:
            lines.append("skills: " + ", ".join(self.skills))
        if self.mcps:
            lines.append("mcp servers: " + ", ".join(self.mcps))
        if self.members:
            lines.append("members: " + ", ".join(self.members))
        if not lines:
            return ""
        return "<scope>\n" + "\n".join(lines) + "\n</scope>"
