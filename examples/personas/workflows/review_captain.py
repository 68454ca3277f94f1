"""Entry workflow of the review_captain persona (examples/personas/charter.toml).

``read_diff`` reads the pull request and its diff from GitHub (read_only tools, so they
run at every tier); ``comment`` posts one review with line comments anchored to the diff
(``github_post_review``, a network write the autonomy tier gates: the pack rolls
review_captain out in shadow, so the review becomes a dry-run receipt carrying the exact
request, method, path and body, that would have been sent). Findings, with the head SHA
that was reviewed, are handed to merge_captain through the ``review-findings`` route,
whose ``policy_override`` makes that handoff run read-only.
"""

from __future__ import annotations

from typing import Any

from charter.agent import step


def run(ctx: Any) -> dict[str, Any]:
    """Called by ``charter persona run`` with a :class:`charter.run.RunContext`."""
    if ctx is None:  # smoke check of the template pack: nothing to act on
        return {"persona": "review_captain", "dry_run": True, "status": "ok"}
    tools = _load_tools()
    if ctx.handoff_item is not None:
        item = ctx.handoff_item
        return {
            "persona": "review_captain",
            "handoff": item["handoff_id"],
            "from": item.get("from"),
            "acknowledged": item.get("summary"),
            "status": "ok",
        }
    tools.register_github(ctx)
    pr = int(ctx.trigger.metadata.get("number", 0))
    head = _head_sha(ctx, pr)
    findings = read_diff(ctx, pr)
    comment(ctx, pr, head)
    blocking = "BLOCKING" in findings
    ctx.handoff(
        "review_findings",
        {"pr": pr, "repository": tools.repository(ctx), "head_sha": head, "findings": findings},
        summary=f"review of PR #{pr}: {'blocking' if blocking else 'no blocking'} findings",
        facts={"blocking_findings": blocking},
    )
    return {
        "persona": "review_captain",
        "pr": pr,
        "tier": ctx.tier,
        "dry_run": ctx.dry_run,
        "head_sha": head,
        "findings": findings,
        "status": "ok",
    }


def _head_sha(ctx: Any, pr: int) -> str | None:
    """The head SHA being reviewed (the review is anchored to it)."""
    got = ctx.call_tool("github_get_pull_request", number=pr)
    if isinstance(got, dict) and got.get("status") == "ok":
        return str((got.get("head") or {}).get("sha"))
    return ctx.trigger.metadata.get("head_sha")


@step("read_diff")
def read_diff(ctx: Any, pr: int) -> str:
    result = ctx.agent(
        f"Review pull request #{pr}: read its diff and list your findings.",
        tools=["github_get_pull_request", "github_get_diff", "github_list_files", "read", "grep",
               "glob"],
    )
    return str(result.visible_text)


@step("comment")
def comment(ctx: Any, pr: int, head: str | None) -> str:
    result = ctx.agent(
        f"Post one review of pull request #{pr} (head {head}) with github_post_review: a "
        "summary, and line comments anchored to the diff (path, line, side).",
        tools=["github_post_review"],
    )
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
