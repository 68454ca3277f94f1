"""Judges that review a turn before its tool calls run: ``step_judge`` and the stalled
``done_judge`` (``cadence.when = "stalled"``), at the loop's ``before_dispatch`` point.

``step_judge`` (seed 001): after an assistant turn and before dispatch, a structured
judge accepts or rejects the proposed step. A rejection either replaces the turn (it is
dropped, the feedback is sent and the model regenerates: ``on_veto = "replace"``, the
default) or retains it (the calls are answered "not executed" and the feedback follows:
``"retain"``). ``max_attempts`` rejections of one turn in a row accept the next attempt.
It skips (``step_judge_decision`` with ``skipped: true``) a turn without tool calls
(``skip_when_empty``, default true), a turn that trips stall diagnostics
(``skip_when_stalled``), and a turn with fewer than ``skip_when_iterations_remaining``
(default 1) iterations left after it, where no regeneration could happen.

A ``done_judge`` whose cadence says ``when: "stalled"`` runs when stall diagnostics are
about to fire, before the repeated call is dispatched: ``done`` stops the loop with
``stalled_done_judge``; ``continue`` leaves the stall feedback path as it is. Its
``JudgeDecision`` carries ``trigger: "stalled"``.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Mapping
from typing import Any

from .completion import judge_once
from .hooks import LoopHook
from .judges import read_verdict
from .options import AgentOptionError
from .providers import LlmRequest, get_provider
from .stall import would_stall

STEP_JUDGE_SYSTEM = (
    "You review one step of an agent before its tool calls run. Reply with JSON only: "
    '{"verdict": "accept" | "reject", "reasoning": "...", "next_step": "..."}. Reject a '
    "step that is unsafe, off-task, or repeats what already failed; say what to do instead."
)
_KEYS = {
    "provider",
    "model",
    "system",
    "on_veto",
    "max_attempts",
    "skip_when_empty",
    "skip_when_stalled",
    "skip_when_iterations_remaining",
    "judge",
}


def parse_step_verdict(text: str) -> dict[str, Any]:
    """``{verdict: accept|reject, reasoning, next_step}``; unreadable replies reject (fail
    closed: an unread review must not wave a step through)."""
    return read_verdict(
        text,
        ("accept", "reject"),
        {
            "verdict": "reject",
            "reasoning": "the step judge's reply could not be read",
            "next_step": None,
        },
    )


class StepJudgeHook(LoopHook):
    """``step_judge``: accept or reject each proposed step before dispatch."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        unknown = set(spec) - _KEYS
        if unknown:
            raise AgentOptionError("step_judge", f"unknown key(s) {', '.join(sorted(unknown))}")
        self.on_veto = spec.get("on_veto", "replace")
        if self.on_veto not in ("replace", "retain"):
            raise AgentOptionError("step_judge.on_veto", 'expected "replace" or "retain"')
        self.max_attempts = int(spec.get("max_attempts", 2))
        self.skip_empty = bool(spec.get("skip_when_empty", True))
        self.skip_stalled = bool(spec.get("skip_when_stalled", False))
        self.skip_remaining = int(spec.get("skip_when_iterations_remaining", 1))
        self.judge = spec.get("judge")
        if self.judge is not None and not callable(self.judge):
            raise AgentOptionError("step_judge.judge", "expected a callable")
        self.provider = spec.get("provider")
        self.model = spec.get("model")
        self.system = str(spec.get("system") or STEP_JUDGE_SYSTEM)
        self.rejections = 0  # consecutive, for the current turn
        self.invocations = 0
        self.vetoes = 0

    def _skip(self, run: Any, iteration: int, reason: str) -> None:
        run.event("step_judge_decision", iteration=iteration, skipped=True, reason=reason)

    async def before_dispatch(
        self, run: Any, iteration: int, text: str, calls: list[Any]
    ) -> dict[str, Any] | None:
        if not calls and self.skip_empty:
            self._skip(run, iteration, "no tool calls")
            return None
        if self.skip_stalled and would_stall(run, calls):
            self._skip(run, iteration, "stalled")
            return None
        if run.iterations_left() < self.skip_remaining:
            self._skip(run, iteration, "no regeneration turn remains")
            return None
        if self.rejections >= self.max_attempts:
            self._skip(run, iteration, f"max_attempts ({self.max_attempts}) reached")
            self.rejections = 0
            return None
        step = {
            "text": text,
            "tool_calls": [{"name": c.name, "arguments": dict(c.arguments)} for c in calls],
        }
        started = time.perf_counter()
        if self.judge is not None:
            reply = self.judge({"iteration": iteration, "step": step, "messages": run.messages})
            if inspect.isawaitable(reply):
                reply = await reply
            if isinstance(reply, bool):
                verdict = {"verdict": "accept" if reply else "reject", "reasoning": None}
            else:
                verdict = parse_step_verdict(reply if isinstance(reply, str) else json.dumps(reply))
        else:
            spec = self.provider
            provider = get_provider(spec) if spec is not None else run.aux_provider
            request = LlmRequest(
                model=self.model or run.cfg.model,
                system=self.system,
                messages=[
                    {
                        "role": "user",
                        "content": f"Task:\n{run.prompt}\n\nRecent transcript:\n"
                        f"{run.transcript_text()}\n\nProposed step:\n{json.dumps(step)}",
                    }
                ],
                purpose="judge",
            )
            response = await provider.complete(request)
            run.stats.input_tokens += response.input_tokens
            run.stats.output_tokens += response.output_tokens
            verdict = parse_step_verdict(response.text or "")
        self.invocations += 1
        run.event(
            "step_judge_decision",
            iteration=iteration,
            skipped=False,
            judge_duration_ms=int((time.perf_counter() - started) * 1000),
            **verdict,
        )
        if verdict["verdict"] == "accept":
            self.rejections = 0
            return None
        self.rejections += 1
        self.vetoes += 1
        feedback = verdict.get("next_step") or verdict.get("reasoning") or "Try a different step."
        return {"action": self.on_veto, "feedback": f"Step rejected by the step judge: {feedback}"}

    def on_finish(self, run: Any) -> None:
        run.extras["step_judge"] = {"invocations": self.invocations, "vetoes": self.vetoes}


class StalledJudgeHook(LoopHook):
    """Runs the ``done_judge`` (``cadence.when = "stalled"``) when a stall is about to fire."""

    async def before_dispatch(
        self, run: Any, iteration: int, text: str, calls: list[Any]
    ) -> dict[str, Any] | None:
        judge = run.cfg.done_judge
        if judge is None or not calls or not would_stall(run, calls):
            return None
        if not judge.due(iteration, {"iteration": iteration, "messages": run.messages}, "stalled"):
            return None
        decision = await judge_once(run, judge, iteration, trigger="stalled")
        if decision["verdict"] == "done":
            return {"action": "stop", "stop_reason": "stalled_done_judge"}
        return None


def review_hooks(options: Mapping[str, Any], done_judge: Any) -> list[LoopHook]:
    hooks: list[LoopHook] = []
    step = options.get("step_judge")
    if step is not None and step is not False:
        if step is True:
            step = {}
        if not isinstance(step, Mapping):
            raise AgentOptionError("step_judge", "expected a dict (or true)")
        hooks.append(StepJudgeHook(step))
    if done_judge is not None and done_judge.when == "stalled":
        hooks.append(StalledJudgeHook())
    return hooks
