"""Skills: BM25 matching picks ``ship`` for a deploy task; its ``allowed_tools`` become a
frame on the policy stack, so the tool it does not list is hidden and denied.

Run: python examples/agents/skills_lifecycle.py
"""

from __future__ import annotations

from _provider import choose

from charter.agent import Skill, agent_loop, make_tool

ran: list[str] = []


def deploy_service(service: str) -> str:
    ran.append(f"deploy {service}")
    return f"{service} deployed"


def drop_database(name: str) -> str:
    ran.append(f"drop {name}")
    return "dropped"


SKILLS = [
    Skill(
        "ship",
        "Ship a production release",
        "Follow the deploy runbook. One command at a time.",
        when_to_use="User says ship, release or deploy",
        paths=("infra/**",),
        allowed_tools=("deploy_service",),
    ),
    Skill("review", "Review Python code for bugs", "Be picky."),
]

if __name__ == "__main__":
    provider, model = choose(
        [
            {"tool_calls": [{"name": "drop_database", "arguments": {"name": "prod"}}]},
            {"tool_calls": [{"name": "deploy_service", "arguments": {"service": "api"}}]},
            "Released api.",
        ]
    )
    result = agent_loop(
        "Ship the new release of the api service to production",
        "You are a deploy engineer.",
        provider=provider,
        model=model,
        tools=[
            make_tool(deploy_service, side_effect_level="network"),
            make_tool(drop_database, side_effect_level="network"),
        ],
        skills=SKILLS,
        working_files=["infra/api.tf"],
        loop_until_done=True,
        max_iterations=6,
    )
    for event in result.trace["events"]:
        if event["type"].startswith("skill_"):
            print(event["type"], {k: v for k, v in event.items() if k != "type"})
    print("status:", result.status, "active skills:", result.to_dict()["active_skills"])
    print("handlers ran:", ran)
