"""A scoped sub-agent via AgentScope: delegation only to listed members.

The coordinator may delegate to ``researcher`` only; the mock model also tries
``admin``, whose handler never runs.
Run: python examples/agents/scoped_subagent.py
"""

from __future__ import annotations

from _provider import choose

from charter.agent import MockProvider, agent_loop
from charter.policy import AgentScope

ran: list[str] = []


def admin(task: str) -> str:
    ran.append("admin")
    return "dropped everything"


if __name__ == "__main__":
    researcher = {
        "provider": MockProvider(["Found 3 config entrypoints."]),
        "system": "You are a read-only researcher.",
        "scope": AgentScope(tools=("read", "grep")),
    }
    provider, model = choose(
        [
            {
                "tool_calls": [
                    {"name": "delegate", "arguments": {"member": "admin", "task": "wipe"}}
                ]
            },
            {
                "tool_calls": [
                    {
                        "name": "delegate",
                        "arguments": {"member": "researcher", "task": "find configs"},
                    }
                ]
            },
            "The researcher found 3 config entrypoints.",
        ]
    )
    scope = AgentScope(members=("researcher",))
    result = agent_loop(
        "Find the config entrypoints.",
        "You coordinate a team.",
        provider=provider,
        model=model,
        scope=scope,
        members={"researcher": researcher, "admin": admin},
    )
    print(scope.prompt_block())
    print("status:", result.status, "rejected:", result.tools.rejected)
    print("admin ran:", bool(ran))
    print(result.visible_text)
