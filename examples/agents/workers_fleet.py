"""Workers: three background workers run concurrently under the spawner's stack, each
with a budget reserved from the spawner's; one is given a follow-up with send_input.

Run: python examples/agents/workers_fleet.py
"""

from __future__ import annotations

import asyncio

from charter.agent import (
    MockProvider,
    list_agents,
    make_tool,
    send_input,
    spawn_agent,
    wait_agent,
)
from charter.agent.subagents import _LEDGER, TokenLedger
from charter.policy import with_execution_policy


def lookup(topic: str) -> str:
    return f"notes on {topic}"


async def main() -> None:
    token = _LEDGER.set(TokenLedger(1000))  # the spawner's own budget
    try:
        with with_execution_policy({"side_effect_level": "read_only"}, label="lead"):
            handles = [
                await spawn_agent(
                    {
                        "task": f"Research {topic}",
                        "name": topic,
                        "tools": [make_tool(lookup, side_effect_level="read_only")],
                        "token_budget": 400,
                        "provider": MockProvider(
                            [
                                {
                                    "tool_calls": [
                                        {"name": "lookup", "arguments": {"topic": topic}}
                                    ],
                                    "usage": {"input_tokens": 50},
                                },
                                f"{topic}: done",
                                f"{topic}: shorter",
                            ]
                        ),
                    }
                )
                for topic in ("auth", "billing", "search")
            ]
        print("granted budgets:", [h["token_budget"] for h in handles])
        for env in await wait_agent(handles):
            print(env["worker"]["name"], env["status"], env["summary"])
        await send_input(handles[0], "Make it shorter.")
        print("follow-up:", (await wait_agent(handles[0]))["summary"])
        print("agents:", [(a["name"], a["status"]) for a in list_agents()])
    finally:
        _LEDGER.reset(token)


if __name__ == "__main__":
    asyncio.run(main())
