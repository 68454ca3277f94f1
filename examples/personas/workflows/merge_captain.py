"""Entry workflow of the merge_captain persona (examples/personas/charter.toml).

The steps match the persona's stages, so the runtime pushes each stage's policy while the
step runs: ``classify`` reads (read_only), ``merge`` may call GitHub, ``apply_repair`` may
run commands. Whether a side effect executes is the autonomy tier's call, not this code's:
under ``act_with_approval`` the merge waits for ``charter approve``.
"""

from __future__ import annotations

from typing import Any

from charter.agent import step


def run(ctx: Any) -> dict[str, Any]:
    """Called by ``charter persona run`` with a :class:`charter.run.RunContext`."""
    if ctx is None:  # smoke check of the template pack: nothing to act on
        return {"persona": "merge_captain", "dry_run": True, "status": "ok"}
    tools = _load_tools()
    ctx.register_tool(tools.github_tool(ctx.workspace))
    if ctx.handoff_item is not None:
        return act_on_handoff(ctx)
    meta = ctx.trigger.metadata
    pr = int(meta.get("number", 0))
    assessment = classify(ctx, pr)
    if ctx.trigger.kind in ("check_failed", "check_run"):
        outcome = apply_repair(ctx, pr, meta.get("check_run_id", ""))
        # never merged on a failed check: the receipt says so and goes on for review
        ctx.handoff(
            "merge_receipt",
            {"pr": pr, "work_key": ctx.trigger.work_key, "outcome": outcome, "merged": False},
            summary=f"merge_captain did not merge PR #{pr}: check failed ({assessment[:80]})",
        )
    else:
        outcome = merge(ctx, pr)
        ctx.handoff(
            "merge_receipt",
            {"pr": pr, "work_key": ctx.trigger.work_key, "outcome": outcome},
            summary=f"merge_captain handled PR #{pr}: {outcome}",
        )
    return {
        "persona": "merge_captain",
        "pr": pr,
        "tier": ctx.tier,
        "dry_run": ctx.dry_run,
        "assessment": assessment,
        "outcome": outcome,
        "status": "ok",
    }


@step("classify")
def classify(ctx: Any, pr: int) -> str:
    result = ctx.agent(
        f"Classify pull request #{pr} ({ctx.trigger.work_key}): read its diff or CI log "
        "and say whether it is ready to merge.",
        tools=["read", "grep"],
    )
    return str(result.visible_text)


@step("merge")
def merge(ctx: Any, pr: int) -> str:
    result = ctx.agent(f"Merge pull request #{pr} if it is ready.", tools=["github"])
    return str(result.visible_text)


@step("apply_repair")
def apply_repair(ctx: Any, pr: int, check: str) -> str:
    result = ctx.agent(
        f"Check {check} failed on pull request #{pr}. Repair it.", tools=["bash", "github"]
    )
    return str(result.visible_text)


def act_on_handoff(ctx: Any) -> dict[str, Any]:
    item = ctx.handoff_item
    payload = item.get("payload") or {}
    pr = int(payload.get("pr", 0))
    result = merge(ctx, pr)
    return {
        "persona": "merge_captain",
        "handoff": item["handoff_id"],
        "from": item.get("from"),
        "pr": pr,
        "outcome": result,
        "status": "ok",
    }


def _load_tools() -> Any:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).with_name("_tools.py")
    spec = importlib.util.spec_from_file_location("charter_pack_tools", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
