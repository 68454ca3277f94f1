"""Entry workflow of the merge_captain persona (examples/personas/charter.toml).

The steps match the persona's stages, so the runtime pushes each stage's policy while the
step runs: ``classify`` reads (read_only), ``merge`` may call GitHub, ``apply_repair`` may
run commands. The merge is decided here, not by the model: only when every check branch
protection requires passed on the head, and only if the head is still the SHA that was
classified or reviewed (``github_merge`` sends it as ``sha``, so a head that moved in
between is refused by GitHub with a 409). Whether the merge then executes is the autonomy
tier's call: under ``act_with_approval`` it waits for ``charter approve``.
"""

from __future__ import annotations

from typing import Any

from charter.agent import step


def run(ctx: Any) -> dict[str, Any]:
    """Called by ``charter persona run`` with a :class:`charter.run.RunContext`."""
    if ctx is None:  # smoke check of the template pack: nothing to act on
        return {"persona": "merge_captain", "dry_run": True, "status": "ok"}
    tools = _load_tools()
    tools.register_github(ctx)
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
        outcome = merge(ctx, pr, meta.get("head_sha"))
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
        tools=["github_get_pull_request", "github_get_diff", "read", "grep"],
    )
    return str(result.visible_text)


@step("merge")
def merge(ctx: Any, pr: int, reviewed: str | None) -> str:
    checks = ctx.call_tool("github_get_required_checks", number=pr)
    if not isinstance(checks, dict) or checks.get("status") != "ok":
        return f"not merged: the required checks could not be read ({_why(checks)})"
    if not checks.get("passing"):
        failing = [c["name"] for c in checks.get("required", []) if c["state"] != "success"]
        return f"not merged: required checks not passing: {', '.join(failing)}"
    if not reviewed:
        return "not merged: no reviewed head SHA to pin the merge to"
    if checks.get("head_sha") != reviewed:
        return f"not merged: the head moved from {reviewed[:12]} to {str(checks['head_sha'])[:12]}"
    result = ctx.call_tool("github_merge", number=pr, sha=reviewed)
    if isinstance(result, dict) and result.get("status") == "ok":
        return f"merged #{pr} at {reviewed[:12]} as {str(result.get('sha'))[:12]}"
    return f"not merged: {_why(result)}"


def _why(observation: Any) -> str:
    if isinstance(observation, dict):
        return str(observation.get("message") or observation.get("status") or observation)
    return str(observation)


@step("apply_repair")
def apply_repair(ctx: Any, pr: int, check: str) -> str:
    result = ctx.agent(
        f"Check {check} failed on pull request #{pr}. Repair it.",
        tools=["bash", "github_get_diff", "github_comment"],
    )
    return str(result.visible_text)


def act_on_handoff(ctx: Any) -> dict[str, Any]:
    item = ctx.handoff_item
    payload = item.get("payload") or {}
    pr = int(payload.get("pr", 0))
    result = merge(ctx, pr, payload.get("head_sha"))
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
