"""sub_agent_run: a child narrower than its parent, with a token budget and a schema.

The parent stack denies ``write_file``; the child asks for it anyway and is refused.
A second child returns JSON validated against ``returns.schema``.
Run: python examples/agents/sub_agent_envelope.py
"""

from __future__ import annotations

import json

from charter.agent import MockProvider, make_tool, sub_agent_run, sub_agent_transcript
from charter.policy import with_execution_policy

ran: list[str] = []


def read_file(path: str) -> str:
    ran.append(f"read {path}")
    return "[tool.charter]\nentry = 'main'"


def write_file(path: str, content: str) -> str:
    ran.append(f"write {path}")
    return "written"


TOOLS = [
    make_tool(read_file, side_effect_level="read_only"),
    make_tool(write_file, side_effect_level="workspace_write"),
]


def turn(name: str, **args: str) -> dict[str, object]:
    return {"tool_calls": [{"name": name, "arguments": args}], "usage": {"input_tokens": 40}}


if __name__ == "__main__":
    with with_execution_policy({"tools": {"deny": ["write_file"]}}, label="parent"):
        refused = sub_agent_run(
            "Tidy the config.",
            provider=MockProvider([turn("write_file", path="a", content="x"), "gave up"]),
            tools=TOOLS,
            allowed_tools=["read_file", "write_file"],
            token_budget=500,
        )
        found = sub_agent_run(
            "Find the config entrypoints.",
            provider=MockProvider(
                [turn("read_file", path="pyproject.toml"), '{"paths": ["pyproject.toml"]}']
            ),
            tools=TOOLS,
            allowed_tools=["read_file"],
            token_budget=500,
            returns={
                "schema": {
                    "type": "object",
                    "required": ["paths"],
                    "properties": {"paths": {"type": "array"}},
                }
            },
        )
    print("refused:", json.dumps(refused["error"]))
    print(
        "found:",
        found["ok"],
        found["data"],
        "tokens:",
        found["tokens_used"],
        "/",
        found["token_budget"],
    )
    print("child transcript messages:", len(sub_agent_transcript(found["transcript"])["messages"]))
    print("handlers ran:", ran)
