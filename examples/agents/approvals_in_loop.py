"""Approvals inside agent_loop: reads pass, writes ask a human, secrets are refused.

The approval policy is written in charter's policy language; a write escalates to the
on_escalation callback (here a stand-in for a human who approves config changes only),
and a rule denies anything under secrets/ whatever the human says.
Run: python examples/agents/approvals_in_loop.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from _provider import choose

from charter.agent import agent_loop, builtin_tools

WS = Path(tempfile.mkdtemp())
(WS / "README.md").write_text("demo\n")

POLICY = {
    "rules": [
        {
            "name": "writes-ask",
            "decision": "ask",
            "match": {"side_effect_level": "workspace_write"},
        },
        {"name": "no-secrets", "decision": "deny", "match": {"paths": ["secrets/**"]}},
    ]
}


def human(request):  # type: ignore[no-untyped-def]
    ok = str(request.arguments.get("path", "")).startswith("config/")
    print(f"asked about {request.tool} {request.arguments.get('path')}: {'yes' if ok else 'no'}")
    return {"grant": "once"} if ok else False


def call(path: str) -> dict[str, object]:
    return {"tool_calls": [{"name": "write", "arguments": {"path": path, "content": "x"}}]}


provider, model = choose(
    [
        {"tool_calls": [{"name": "read", "arguments": {"path": "README.md"}}]},
        call("config/app.toml"),
        call("src/main.py"),
        call("secrets/token.txt"),
        "Done.",
    ]
)
result = agent_loop(
    "Update the configuration.",
    provider=provider,
    model=model,
    tools=builtin_tools(str(WS), names=("read", "write")),
    workspace=str(WS),
    approval_policy=POLICY,
    on_escalation=human,
)
events = [e["type"] for e in result.trace["events"] if e["type"].startswith("Permission")]
print("events:", events)
print("written:", sorted(str(p.relative_to(WS)) for p in WS.rglob("*") if p.is_file()))
