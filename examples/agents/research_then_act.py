"""A scoped research-then-act workflow: the research stage is read-only.

The mock model tries to write during research; the stage policy rejects it before the
handler runs, and the same write succeeds in the act stage.
Run: python examples/agents/research_then_act.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from _provider import choose

from charter.agent import agent_loop, builtin_tools, persona, step

WS = Path(tempfile.mkdtemp())
(WS / "notes.md").write_text("TODO: write summary.md\n")
TOOLS = builtin_tools(str(WS), names=("read", "glob", "write"))


@step("research")
def research() -> str:
    provider, model = choose(
        [
            {"tool_calls": [{"name": "read", "arguments": {"path": "notes.md"}}]},
            {
                "tool_calls": [
                    {"name": "write", "arguments": {"path": "summary.md", "content": "x"}}
                ]
            },
            "Research done: notes.md asks for summary.md.",
        ]
    )
    result = agent_loop(
        "Read notes.md and say what to do.",
        provider=provider,
        model=model,
        tools=TOOLS,
        workspace=str(WS),
    )
    print("research:", result.status, "rejected:", result.tools.rejected)
    return result.visible_text


@step("act")
def act(findings: str) -> None:
    provider, model = choose(
        [
            {
                "tool_calls": [
                    {"name": "write", "arguments": {"path": "summary.md", "content": "# Summary\n"}}
                ]
            },
            "Wrote summary.md.",
        ]
    )
    result = agent_loop(
        f"Act on: {findings}", provider=provider, model=model, tools=TOOLS, workspace=str(WS)
    )
    print("act:", result.status, "successful:", result.tools.successful)


@persona(
    "scribe",
    tools=["read", "glob", "write"],
    stages=[
        {
            "name": "research",
            "allowed_tools": ["read", "glob"],
            "side_effect_level": "read_only",
            "on_exit": {"on_complete": "act"},
        },
        {"name": "act", "allowed_tools": ["read", "write"], "side_effect_level": "workspace_write"},
    ],
)
def scribe() -> None:
    act(research())


if __name__ == "__main__":
    scribe()
    for receipt in scribe.last_run.receipts:  # type: ignore[attr-defined]
        print(
            "stage receipt:", receipt["stage"], receipt["outcome"], "->", receipt["next_stage_hint"]
        )
    print("summary.md exists:", (WS / "summary.md").exists())
