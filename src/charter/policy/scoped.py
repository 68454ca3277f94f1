"""``with_scoped_executor``: per-dispatch scoping as tool-caller middleware (seed 000)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from charter.errors import CharterError

from .call import ToolCall
from .decision import Decision
from .effective import effective
from .levels import SideEffectLevel
from .model import Policy
from .stack import current_stack, decide_current, with_execution_policy

R = TypeVar("R")


def _audit_scope(stage: str | None, decision: Decision | None) -> dict[str, Any]:
    view = effective(current_stack())
    scope: dict[str, Any] = {
        "stage": stage,
        "allowed_tools": view["tools"]["allow"],
        "side_effect_level": view["side_effect_level"],
    }
    if view["source_handoff"]:
        scope["source_handoff"] = view["source_handoff"]
    if decision is not None and decision.denied:
        scope["frame"] = decision.frame_label
        scope["dimension"] = decision.dimension
        scope["rule"] = decision.rule
    return scope


def scope_violation(decision: Decision, stage: str | None = None) -> dict[str, Any]:
    """The typed short-circuit receipt: ``status: "scope_violation"`` with ``audit.scope``."""
    return {
        "status": "scope_violation",
        "tool": decision.tool,
        "reason": decision.reason,
        "dimension": decision.dimension,
        "rule": decision.rule,
        "frame": decision.frame_label,
        "audit": {"scope": _audit_scope(stage, decision)},
    }


def _decorate(result: Any, stage: str | None) -> Any:
    scope = _audit_scope(stage, None)
    if isinstance(result, Mapping):
        out = dict(result)
        audit = dict(out.get("audit") or {})
        audit["scope"] = scope
        out["audit"] = audit
        return out
    return {"status": "ok", "result": result, "audit": {"scope": scope}}


class ScopeViolation(CharterError):
    """Raised by a scoped executor built with ``on_violation="raise"``."""

    def __init__(self, receipt: dict[str, Any]) -> None:
        self.receipt = receipt
        super().__init__(receipt["reason"])


def scoped_policy(
    policy: Policy | Mapping[str, Any] | None = None,
    *,
    allowed_tools: list[str] | tuple[str, ...] | None = None,
    side_effect_level: str | SideEffectLevel | None = None,
) -> Policy:
    """A policy (or dict) narrowed by the ``allowed_tools`` / ``side_effect_level`` shorthands."""
    base = Policy() if policy is None else policy
    result = base if isinstance(base, Policy) else Policy.from_dict(base)
    extra: dict[str, Any] = {}
    if allowed_tools is not None:
        extra["tools"] = list(allowed_tools)
    if side_effect_level is not None:
        level = side_effect_level
        extra["side_effect_level"] = level.label if isinstance(level, SideEffectLevel) else level
    if extra:
        result = result.intersect(Policy.from_dict(extra))
    return result


def _check_call(call: object) -> None:
    # A scoped executor handed to ``tool_caller`` directly receives the inner executor, not
    # a call: say so instead of failing deep inside the policy with an AttributeError.
    if not isinstance(call, ToolCall):
        raise TypeError(
            f"scoped executor: expected a ToolCall, got {_describe(call)}; to use "
            "with_scoped_executor as tool_caller middleware pass a policy or options, e.g. "
            "tool_caller=with_scoped_executor({'tools': [...]}) or "
            "tool_caller=lambda ex: with_scoped_executor(ex, ...)"
        )


def _describe(value: object) -> str:
    return type(value).__name__ if not callable(value) else f"callable {value!r}"


def _one(key: str, in_dict: Any, keyword: Any) -> Any:
    if in_dict is not None and keyword is not None and in_dict != keyword:
        raise TypeError(f"with_scoped_executor: {key} given twice, in the dict and as a keyword")
    return in_dict if in_dict is not None else keyword


def with_scoped_executor(
    executor: Callable[[ToolCall], R] | Policy | Mapping[str, Any] | None = None,
    policy: Policy | Mapping[str, Any] | None = None,
    *,
    stage: str | None = None,
    allowed_tools: list[str] | tuple[str, ...] | None = None,
    side_effect_level: str | SideEffectLevel | None = None,
    on_violation: str = "reject",
    label: str | None = None,
) -> Callable[..., Any]:
    """Wrap ``executor`` so each dispatch runs under a scope intersected with the ambient stack.

    Two forms. ``with_scoped_executor(executor, policy, ...)`` returns the scoped
    executor. ``with_scoped_executor(policy_or_options, ...)`` (a :class:`Policy`, a
    policy dict, or nothing but keywords) returns the middleware itself, so
    ``agent_loop(..., tool_caller=with_scoped_executor({"tools": ["look"]}))`` works
    as the seed writes it; the dict may use the stages' vocabulary too
    (``{"allowed_tools": [...], "side_effect_level": ..., "stage": ...}``). Anything
    else is a :class:`TypeError` naming what was given.

    The scope is ``policy`` narrowed by ``allowed_tools`` and ``side_effect_level``. A
    denied call never reaches ``executor``: it returns the ``scope_violation`` receipt
    (``on_violation="reject"``) or raises :class:`ScopeViolation` carrying it
    (``"raise"``). An allowed call's result is decorated with ``audit.scope``. Async
    executors give an async wrapper.
    """
    if on_violation not in ("reject", "raise"):
        raise ValueError(f"on_violation: expected 'reject' or 'raise', got {on_violation!r}")
    if isinstance(executor, Mapping):
        # the seed's stage vocabulary in the options dict: {allowed_tools, side_effect_level,
        # stage} next to (or instead of) policy fields
        spec = dict(executor)
        allowed_tools = _one("allowed_tools", spec.pop("allowed_tools", None), allowed_tools)
        side_effect_level = _one(
            "side_effect_level", spec.pop("side_effect_level", None), side_effect_level
        )
        stage = _one("stage", spec.pop("stage", None), stage)
        executor = spec or None
    if executor is None or isinstance(executor, (Policy, Mapping)):
        if policy is not None:
            raise TypeError(
                "with_scoped_executor: middleware form takes one policy (a Policy or dict) "
                "as its first argument, not a second positional policy"
            )
        # Validate the scope now, so a bad policy fails where it is written, not at dispatch.
        scope = scoped_policy(
            executor, allowed_tools=allowed_tools, side_effect_level=side_effect_level
        )

        def middleware(inner: Callable[[ToolCall], Any]) -> Callable[[ToolCall], Any]:
            if not callable(inner) or isinstance(inner, (Policy, Mapping)):
                raise TypeError(
                    "with_scoped_executor(policy) is tool-caller middleware: call it with "
                    f"the executor to wrap, got {_describe(inner)}"
                )
            return with_scoped_executor(
                inner, scope, stage=stage, on_violation=on_violation, label=label
            )

        return middleware
    if not callable(executor):
        raise TypeError(
            "with_scoped_executor: expected an executor (callable) or a policy "
            f"(Policy or dict) as the first argument, got {_describe(executor)}"
        )
    if policy is not None and not isinstance(policy, (Policy, Mapping)):
        raise TypeError(
            f"with_scoped_executor: policy must be a Policy or dict, got {_describe(policy)}"
        )
    policy = scoped_policy(policy, allowed_tools=allowed_tools, side_effect_level=side_effect_level)
    frame_label = label or (f"stage:{stage}" if stage else "scoped-executor")
    kind = "stage" if stage else "scope"

    def violation(decision: Decision) -> Any:
        receipt = scope_violation(decision, stage)
        if on_violation == "raise":
            raise ScopeViolation(receipt)
        return receipt

    if inspect.iscoroutinefunction(executor):
        async_exec: Callable[[ToolCall], Awaitable[Any]] = executor

        async def run_async(call: ToolCall) -> Any:
            _check_call(call)
            with with_execution_policy(policy, label=frame_label, kind=kind, stage=stage):
                decision = decide_current(call)
                if not decision.allowed:
                    return violation(decision)
                return _decorate(await async_exec(call), stage)

        return run_async

    def run(call: ToolCall) -> Any:
        _check_call(call)
        with with_execution_policy(policy, label=frame_label, kind=kind, stage=stage):
            decision = decide_current(call)
            if not decision.allowed:
                return violation(decision)
            return _decorate(executor(call), stage)

    return run
