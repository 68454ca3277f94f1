"""A captain preset with its layers: reads pass, a merge asks the consent bridge, every
tool call lands in the audit sink and every model call in the logging sink.

Run: python examples/agents/captain_preset.py
"""

from __future__ import annotations

from typing import Any

from _provider import choose

from charter.agent import make_tool, merge_captain_agent

merged: list[int] = []
list_prs = make_tool(
    lambda: [461, 462], name="list_prs", annotations={"side_effect_level": "read_only"}
)
merge_pr = make_tool(
    lambda number: merged.append(number) or {"status": "ok", "merged": number},
    name="merge_pr",
    annotations={"side_effect_level": "network"},
)
provider, model = choose(
    [
        {"tool_calls": [{"name": "list_prs", "arguments": {}}]},
        {"tool_calls": [{"name": "merge_pr", "arguments": {"number": 461}}]},
        {"tool_calls": [{"name": "merge_pr", "arguments": {"number": 462}}]},
        "Merged what was approved.",
    ]
)
audit: list[dict[str, Any]] = []
calls: list[dict[str, Any]] = []


def consent(request: Any) -> bool:  # the HITL bridge: only PR 461 is approved
    return request.arguments.get("number") == 461


result = merge_captain_agent(
    "Sweep open PRs.",
    provider=provider,
    model=model,
    tools=[list_prs, merge_pr],
    consent=consent,
    audit_sink=audit.append,
    logging_sink=calls.append,
)
print("merged:", merged)
print("audited tools:", [a["tool"] for a in audit])
print("model calls logged:", len(calls), "status:", result.status)
