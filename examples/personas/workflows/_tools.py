"""Tools shared by the template pack's workflows.

``github`` here is a local stand-in for the GitHub MCP server named in persona.json: it
records each request it would send in ``.fake_github/actions.jsonl`` under the workspace
(so a demo can show what executed and what did not) and returns a plausible answer.
Replace it with your MCP server or API client when you fork the pack.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from charter.agent import Tool, make_tool


def github_tool(workspace: Path) -> Tool:
    def github(action: str, pr: int, body: str = "", method: str = "squash") -> dict[str, Any]:
        """Act on a GitHub pull request: action is comment, review or merge."""
        record = {"action": action, "pr": int(pr), "body": body, "method": method}
        out = Path(workspace) / ".fake_github" / "actions.jsonl"
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
        answer: dict[str, Any] = {"status": "ok", "action": action, "pr": int(pr)}
        if action == "merge":
            answer["merged"] = True
        return answer

    # Talks to a remote API: the network level, so every tier above shadow gates it.
    return make_tool(github, side_effect_level="network", kind="other")


def _record(workspace: Path, folder: str, record: dict[str, Any]) -> None:
    out = Path(workspace) / folder / "actions.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")


def pagerduty_tool(workspace: Path) -> Tool:
    """A stand-in for the PagerDuty API: records in ``.fake_pagerduty/actions.jsonl``."""

    def pagerduty(action: str, incident: str, note: str = "") -> dict[str, Any]:
        """Act on a PagerDuty incident: action is acknowledge, annotate or resolve."""
        _record(
            workspace, ".fake_pagerduty", {"action": action, "incident": incident, "note": note}
        )
        return {"status": "ok", "action": action, "incident": incident}

    return make_tool(pagerduty, side_effect_level="network", kind="other")


def slack_tool(workspace: Path) -> Tool:
    """A stand-in for Slack's chat.postMessage: records in ``.fake_slack/actions.jsonl``."""

    def slack(channel: str, text: str) -> dict[str, Any]:
        """Post a message to a Slack channel."""
        _record(workspace, ".fake_slack", {"channel": channel, "text": text})
        return {"status": "ok", "channel": channel}

    return make_tool(slack, side_effect_level="network", kind="other")
