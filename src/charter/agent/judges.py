"""Completion gates: ``verify_completion``, ``verify_completion_judge`` and ``done_judge``."""

from __future__ import annotations

import inspect
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .options import AgentOptionError
from .providers.base import LlmRequest, Provider

JUDGE_SYSTEM = (
    "You are a completion judge. Read the task and the agent's transcript and decide "
    'whether the task is complete. Reply with JSON only: {"verdict": "done" | "continue", '
    '"reasoning": "...", "next_step": "..."}.'
)
_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


@dataclass
class JudgeConfig:
    """A resolved structured judge (``done_judge`` or ``verify_completion_judge``)."""

    kind: str
    cap: int | None
    provider: Any = None
    model: str | None = None
    system: str = JUDGE_SYSTEM
    feedback_fallback: str = "The completion judge says the task is not complete yet. Continue."
    judge: Callable[[dict[str, Any]], Any] | None = None
    every: int | None = None
    when: Any = "always"
    cadence_max: int | None = None
    min_before_first: int = 0
    invocations: int = 0
    vetoes: int = 0
    cap_reached: bool = False
    decisions: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def parse(cls, option: str, value: Any, default_cap: int | None) -> JudgeConfig | None:
        if value is None or value is False:
            return None
        spec: dict[str, Any] = (
            {}
            if value is True
            else dict(value)
            if isinstance(value, Mapping)
            else {"judge": value}
            if callable(value)
            else {"__bad__": value}
        )
        if "__bad__" in spec:
            raise AgentOptionError(option, "expected a bool, a dict or a callable")
        allowed = {
            "provider",
            "model",
            "system",
            "feedback_fallback",
            "max_invocations",
            "max_feedback",
            "judge",
            "cadence",
        }
        unknown = set(spec) - allowed
        if unknown:
            raise AgentOptionError(option, f"unknown field(s) {', '.join(sorted(unknown))}")
        cap_value = spec.get("max_invocations", spec.get("max_feedback", default_cap))
        if cap_value is not None and (
            isinstance(cap_value, bool) or not isinstance(cap_value, int) or cap_value < 0
        ):
            raise AgentOptionError(option, "max_invocations must be a non-negative integer")
        cfg = cls(
            kind=option,
            cap=None if not cap_value else int(cap_value),
            provider=spec.get("provider"),
            model=spec.get("model"),
            system=str(spec.get("system") or JUDGE_SYSTEM),
            judge=spec.get("judge"),
        )
        if spec.get("feedback_fallback"):
            cfg.feedback_fallback = str(spec["feedback_fallback"])
        cadence = spec.get("cadence") or {}
        if not isinstance(cadence, Mapping):
            raise AgentOptionError(option, "cadence must be a dict")
        bad = set(cadence) - {"every", "when", "max_invocations", "min_iterations_before_first"}
        if bad:
            raise AgentOptionError(option, f"unknown cadence field(s) {', '.join(sorted(bad))}")
        cfg.every = cadence.get("every")
        cfg.when = cadence.get("when", "always")
        cfg.cadence_max = cadence.get("max_invocations")
        cfg.min_before_first = int(cadence.get("min_iterations_before_first", 0))
        if cfg.when not in ("always", "stalled") and not callable(cfg.when):
            raise AgentOptionError(option, "cadence.when must be 'always', 'stalled' or callable")
        return cfg

    def due(self, iteration: int, state: dict[str, Any], trigger: str | None = None) -> bool:
        """Whether the judge runs for this completion candidate (``cadence``)."""
        if self.cadence_max is not None and self.invocations >= self.cadence_max:
            return False
        if iteration <= self.min_before_first:
            return False
        if self.every and iteration % self.every != 0:
            return False
        if self.when == "stalled":
            return trigger == "stalled"
        if callable(self.when):
            return bool(self.when(state))
        return True

    def summary(self) -> dict[str, Any]:
        return {
            "invocations": self.invocations,
            "vetoes": self.vetoes,
            "max_invocations": self.cap,
            "cap_reached": self.cap_reached,
        }


def read_verdict(
    text: str, verdicts: tuple[str, ...], unreadable: dict[str, Any]
) -> dict[str, Any]:
    """``{verdict, reasoning, next_step}`` from a judge reply (JSON, possibly fenced), or
    ``unreadable`` when there is no object with one of ``verdicts``."""
    match = _OBJECT.search(text or "")
    data: Any = None
    if match:
        try:
            data = json.loads(match.group(0))
        except json.JSONDecodeError:
            data = None
    if not isinstance(data, dict) or data.get("verdict") not in verdicts:
        return dict(unreadable)
    return {
        "verdict": data["verdict"],
        "reasoning": data.get("reasoning"),
        "next_step": data.get("next_step"),
    }


def parse_verdict(text: str) -> dict[str, Any]:
    """Read a completion judge's ``{verdict: done|continue, reasoning, next_step}``."""
    return read_verdict(
        text,
        ("done", "continue"),
        {"verdict": "done", "reasoning": "unparseable judge reply", "next_step": None},
    )


async def run_judge(
    cfg: JudgeConfig,
    *,
    provider: Provider,
    model: str | None,
    task: str,
    transcript_text: str,
    state: dict[str, Any],
) -> dict[str, Any]:
    """Invoke the judge once; returns ``{verdict, reasoning, next_step, judge_duration_ms}``."""
    started = time.perf_counter()
    if cfg.judge is not None:
        reply = cfg.judge(state)
        if inspect.isawaitable(reply):
            reply = await reply
        if isinstance(reply, bool):
            verdict = {
                "verdict": "done" if reply else "continue",
                "reasoning": None,
                "next_step": None,
            }
        elif isinstance(reply, str):
            verdict = parse_verdict(reply)
        else:
            verdict = parse_verdict(json.dumps(reply))
    else:
        request = LlmRequest(
            model=cfg.model or model,
            system=cfg.system,
            messages=[
                {
                    "role": "user",
                    "content": f"Task:\n{task}\n\nTranscript:\n{transcript_text}\n\n"
                    "Is the task complete? Answer with the JSON object only.",
                }
            ],
            purpose="judge",
        )
        response = await provider.complete(request)
        verdict = parse_verdict(response.text)
    cfg.invocations += 1
    out: dict[str, Any] = dict(verdict)
    out["judge_duration_ms"] = int((time.perf_counter() - started) * 1000)
    return out
