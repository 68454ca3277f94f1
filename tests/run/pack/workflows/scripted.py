"""A test workflow driven by its trigger payload: ``{"calls": [...], "agent": ..., ...}``.

Each call is ``{"tool", "args", "stage"?}``; ``stage`` runs it inside that ``@step``.
``github`` is a fake that appends to ``executed.jsonl`` in the workspace, so tests can
see exactly what executed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from charter.agent import make_tool, step


def _github(workspace: Path) -> Any:
    def github(action: str, pr: int = 0) -> dict[str, Any]:
        """Act on GitHub (fake)."""
        with (Path(workspace) / "executed.jsonl").open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"action": action, "pr": pr}) + "\n")
        return {"status": "ok", "action": action}

    return make_tool(github, side_effect_level="network")


@step("look")
def look(ctx: Any, tool: str, args: dict[str, Any]) -> Any:
    return ctx.call_tool(tool, **args)


@step("act")
def act(ctx: Any, tool: str, args: dict[str, Any]) -> Any:
    return ctx.call_tool(tool, **args)


def plain(ctx: Any, tool: str, args: dict[str, Any]) -> Any:
    return ctx.call_tool(tool, **args)


def run(ctx: Any) -> dict[str, Any]:
    ctx.register_tool(_github(ctx.workspace))
    if ctx.handoff_item is not None:
        plan = dict((ctx.handoff_item.get("payload") or {}).get("plan") or {})
    else:
        plan = dict(ctx.trigger.payload or {})
    results: list[Any] = []
    if plan.get("sleep"):  # a long run a test can kill -9 once the marker exists
        (Path(ctx.workspace) / "started").write_text(ctx.run_id)
        time.sleep(float(plan["sleep"]))
    handoffs = plan.get("handoffs", [])
    if plan.get("handoffs_first"):
        _handoffs(ctx, handoffs)
        handoffs = []
    for call in plan.get("calls", []):
        fn = {"look": look, "act": act}.get(call.get("stage"), plain)
        results.append(fn(ctx, call["tool"], call.get("args", {})))
    hang = Path(ctx.workspace) / "hung"
    if plan.get("hang_after_calls") and not hang.exists():
        # the first attempt hangs after its calls (a test kills it there); a retry goes on
        hang.write_text(ctx.run_id)
        time.sleep(float(plan["hang_after_calls"]))
    ctx_results = results  # (what the calls answered: replayed ones included)
    if plan.get("report_results"):
        (Path(ctx.workspace) / f"results-{ctx.run_id}.json").write_text(json.dumps(ctx_results))
    if plan.get("agent"):
        res = ctx.agent(
            plan["agent"], tools=plan.get("agent_tools"), escalate=plan.get("escalate", False)
        )
        results.append({"agent": res.status, "text": res.visible_text})
    _handoffs(ctx, handoffs)
    if plan.get("fail"):
        raise RuntimeError(plan["fail"])
    return {"results": results, "tier": ctx.tier, "packs": sorted(ctx.context_packs)}


def _handoffs(ctx: Any, handoffs: list[dict[str, Any]]) -> None:
    for h in handoffs:
        ctx.handoff(
            h["kind"],
            h.get("payload", {}),
            policy_override=h.get("policy_override"),
            facts=h.get("facts"),
        )
