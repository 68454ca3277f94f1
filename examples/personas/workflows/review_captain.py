"""Entry workflow of the review_captain persona (examples/personas/charter.toml).

``read_diff`` reads (read_only); ``comment`` posts the review through GitHub, which the
autonomy tier gates (the pack rolls review_captain out in shadow: the comment becomes a
dry-run receipt). Findings are handed to merge_captain through the ``review-findings``
route, whose ``policy_override`` makes that handoff run read-only.
"""

from __future__ import annotations

from typing import Any

from charter.agent import step


def run(ctx: Any) -> dict[str, Any]:
    """Called by ``charter persona run`` with a :class:`charter.run.RunContext`."""
    if ctx is None:  # smoke check of the template pack: nothing to act on
        return {"persona": "review_captain", "dry_run": True, "status": "ok"}
    tools = _load_tools()
    ctx.register_tool(tools.github_tool(ctx.workspace))
    if ctx.handoff_item is not None:
        item = ctx.handoff_item
        return {
            "persona": "review_captain",
            "handoff": item["handoff_id"],
            "from": item.get("from"),
            "acknowledged": item.get("summary"),
            "status": "ok",
        }
    pr = int(ctx.trigger.metadata.get("number", 0))
    findings = read_diff(ctx, pr)
    comment(ctx, pr)
    blocking = "BLOCKING" in findings
    ctx.handoff(
        "review_findings",
        {"pr": pr, "findings": findings},
        summary=f"review of PR #{pr}: {'blocking' if blocking else 'no blocking'} findings",
        facts={"blocking_findings": blocking},
    )
    return {
        "persona": "review_captain",
        "pr": pr,
        "tier": ctx.tier,
        "dry_run": ctx.dry_run,
        "findings": findings,
        "status": "ok",
    }


@step("read_diff")
def read_diff(ctx: Any, pr: int) -> str:
    result = ctx.agent(
        f"Review pull request #{pr}: read its diff and list your findings.",
        tools=["read", "grep", "glob"],
    )
    return str(result.visible_text)


@step("comment")
def comment(ctx: Any, pr: int) -> str:
    result = ctx.agent(f"Post your review of pull request #{pr}.", tools=["github"])
    return str(result.visible_text)


def _load_tools() -> Any:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).with_name("_tools.py")
    spec = importlib.util.spec_from_file_location("charter_pack_tools", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
