"""Completion gates: what stands between a completion candidate and the end of the loop.

``verify_completion`` (a callback), ``verify_completion_judge`` and ``done_judge`` (structured
judges with ``cadence``, each decision a ``JudgeDecision`` with its ``trigger``),
``max_verify_attempts`` (vetoes from all gates, then ``verify_capped``) and
``output_schema`` (the answer must be JSON the schema accepts; ``schema_retries``).
"""

from __future__ import annotations

import inspect
from typing import Any

from .judges import JudgeConfig, run_judge
from .providers import get_provider


async def judge_once(
    run: Any, judge: JudgeConfig, iteration: int, *, trigger: str = "completion"
) -> dict[str, Any]:
    """Run ``judge`` once, record the decision (``JudgeDecision``) and return it."""
    state = {"iteration": iteration, "messages": run.messages}
    provider = get_provider(judge.provider) if judge.provider is not None else run.aux_provider
    decision = await run_judge(
        judge,
        provider=provider,
        model=run.cfg.model,
        task=run.prompt,
        transcript_text=run.transcript_text(),
        state=state,
    )
    record = {"iteration": iteration, **decision, "judge": judge.kind, "trigger": trigger}
    judge.decisions.append(record)
    run.judge_decisions.append(record)
    run.event("JudgeDecision", session_id=run.cfg.session_id, **record)
    return record


async def completion_gates(run: Any, iteration: int) -> dict[str, Any] | None:
    """``None`` to accept the stop; else ``{feedback}`` or ``{terminal, stop_reason}``."""
    gate = await _completion_veto(run, iteration)
    if gate is None or gate.get("terminal"):
        return gate
    run.verify_vetoes += 1
    cap = run.cfg.max_verify_attempts
    if cap is not None and run.verify_vetoes >= cap:
        return {"terminal": True, "stop_reason": "max_verify_attempts"}
    return gate


async def _completion_veto(run: Any, iteration: int) -> dict[str, Any] | None:
    cfg = run.cfg
    if cfg.verify_completion is not None:
        verdict = cfg.verify_completion(
            {
                "iteration": iteration,
                "text": "\n".join(run.texts),
                "visible_text": "\n".join(run.visible_texts),
                "messages": [dict(m) for m in run.messages],
                "successful_tools": list(run.tool_stats.successful),
            }
        )
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict is False or (isinstance(verdict, str) and verdict):
            note = verdict if isinstance(verdict, str) else "Not complete yet; continue."
            run.event("verify_completion_veto", iteration=iteration, feedback=note)
            return {"feedback": note, "verdict": "continue"}
    for judge, cap_reason in (
        (cfg.verify_judge, "completion_judge_cap_reached"),
        (cfg.done_judge, "done_judge_cap_reached"),
    ):
        if judge is None:
            continue
        if not judge.due(iteration, {"iteration": iteration, "messages": run.messages}):
            continue
        decision = await judge_once(run, judge, iteration)
        if decision["verdict"] == "done":
            continue
        judge.vetoes += 1
        if judge.cap is not None and judge.vetoes >= judge.cap:
            judge.cap_reached = True
            return {"terminal": True, "stop_reason": cap_reason}
        feedback = decision.get("next_step") or decision.get("reasoning")
        return {"feedback": str(feedback or judge.feedback_fallback), "verdict": "continue"}
    if cfg.output_schema is not None:
        return check_output_schema(run)
    return None


def check_output_schema(run: Any) -> dict[str, Any] | None:
    """The final text must be a valid answer for ``output_schema`` (a JSON Schema or a
    type; ``schema_retries`` retries). The validated object is the result's ``output``."""
    spec = run.cfg.output_schema
    assert spec is not None
    value, data, problem = spec.validate(run.texts[-1] if run.texts else "")
    if problem is None:
        run.extras["data"] = data
        run.output = value
        return None
    run.schema_attempts += 1
    run.event("output_schema_invalid", attempt=run.schema_attempts, error=problem)
    if run.schema_attempts > run.cfg.schema_retries:
        run.extras["output_schema_error"] = problem
        return {"terminal": True, "stop_reason": "output_schema_invalid", "status": "failed"}
    return {
        "feedback": f"Your final answer must be JSON matching the output schema: {problem}. "
        "Reply with the corrected JSON only.",
        "verdict": "continue",
    }
