"""Tool dispatch: every call is decided by ``charter.policy`` before any handler runs."""

from __future__ import annotations

import asyncio
import inspect
import json
import time
import types
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from charter.policy import (
    BUILTIN_TOOLS,
    Decision,
    PathContext,
    ScopeViolation,
    ToolAnnotations,
    ToolCall,
    decide_current,
)
from charter.policy.names import canonical_name

from . import telemetry
from .arguments import InvalidArguments, Validator, from_schema
from .providers.base import ToolCallRequest
from .tools import Tool

Executor = Callable[[ToolCall], Any]
ToolCallerMiddleware = Callable[[Executor], Executor]

_UNSET = object()
REJECTED_STATUSES = frozenset({"permission_denied", "scope_violation", "error", "unknown_tool"})


@dataclass
class ToolOutcome:
    """One attempted call and what became of it (recorded in emitted order)."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    status: str
    observation: Any
    rendered: str
    error: str | None = None
    decision: dict[str, Any] | None = None
    attempts: int = 0
    duration_ms: float = 0.0
    audit: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def summary(self) -> dict[str, Any]:
        """The ``tool_results`` entry post-turn callbacks receive."""
        return {
            "tool_name": self.name,
            "ok": self.ok,
            "status": self.status,
            "rendered_result": self.rendered,
            "error": self.error,
        }

    def audit_event(self, iteration: int) -> dict[str, Any]:
        """The ``tool_call_audit`` event: ``{"type", "iteration", **to_dict()}``, built once."""
        out = {
            "type": "tool_call_audit",
            "iteration": iteration,
            "tool_name": self.name,
            "ok": self.status == "ok",
            "status": self.status,
            "rendered_result": self.rendered,
            "error": self.error,
            "call_id": self.call_id,
            "arguments": self.arguments,
            "decision": self.decision,
            "attempts": self.attempts,
        }
        if self.audit:
            out["audit"] = self.audit
        return out

    def to_dict(self) -> dict[str, Any]:
        out = self.summary()
        out.update(
            {
                "call_id": self.call_id,
                "arguments": self.arguments,
                "decision": self.decision,
                "attempts": self.attempts,
            }
        )
        if self.audit:
            out["audit"] = self.audit
        return out


def render(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _status_of(value: Any) -> tuple[str, str | None]:
    if isinstance(value, dict):
        if value.get("error") == "permission_denied":
            return "permission_denied", str(value.get("reason"))
        status = value.get("status")
        if isinstance(status, str):
            err = value.get("error") or value.get("reason")
            return status, None if status == "ok" or err is None else str(err)
    return "ok", None


class Dispatcher:
    """Decides and runs tool calls for one loop."""

    def __init__(
        self,
        tools: Sequence[Tool],
        *,
        context: PathContext,
        tool_caller: ToolCallerMiddleware | None = None,
        tool_retries: int = 0,
        tool_backoff_ms: int = 1000,
        max_concurrent: int = 1,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        gates: Sequence[ToolCallerMiddleware] = (),
    ) -> None:
        self.registry: dict[str, Tool] = {}
        for t in tools:
            self.registry[canonical_name(t.name)] = t
        self.context = context
        self.tool_retries = tool_retries
        self.tool_backoff_ms = tool_backoff_ms
        self.max_concurrent = max_concurrent
        self._sleep = sleep or asyncio.sleep
        self.policy_ns = 0
        self.decisions = 0
        executor: Executor = self._execute
        executor = tool_caller(executor) if tool_caller else executor
        # without middleware the handler is called in place (one coroutine less per call)
        self._direct = not tool_caller and not gates
        # loop gates (approvals) wrap outermost: they decide before any host middleware runs
        for gate in gates:
            executor = gate(executor)
        self.executor: Executor = executor
        self._templates: dict[str, tuple[str, Tool | None, ToolCall]] = {}
        self._validators: dict[str, Any] = {}  # a call's name -> its tool's validator

    def _validator_for(self, name: str) -> Validator | None:
        """The validator of the tool ``name`` calls (``None``: nothing to check)."""
        tool = self.registry.get(canonical_name(name))
        found: Validator | None = None
        if tool is not None:
            found = tool.validator or from_schema(tool.parameters, tool.name)
        if len(self._validators) >= 256:
            self._validators.clear()
        self._validators[name] = found
        return found

    def annotations_for(self, name: str) -> ToolAnnotations:
        tool = self.registry.get(canonical_name(name))
        if tool is not None:
            return tool.annotations
        return BUILTIN_TOOLS.get(canonical_name(name), ToolAnnotations())

    def _call_for(self, name: str, args: dict[str, Any]) -> ToolCall:
        """``ToolCall(name, args, self.annotations_for(name))``, from a per-name template.

        A tool's calls differ only in their arguments: the name's canonical form, the
        annotations and what the policy derives from them are looked up once per name
        (and again if the registry's entry for it changed), not on every call."""
        hit = self._templates.get(name)
        if hit is None or self.registry.get(hit[0]) is not hit[1]:
            canonical = canonical_name(name)
            template = ToolCall(name, {}, self.annotations_for(name))
            hit = (canonical, self.registry.get(canonical), template)
            if len(self._templates) >= 256:
                self._templates.clear()
            self._templates[name] = hit
        return hit[2].with_arguments(args)

    async def dispatch(self, calls: Sequence[ToolCallRequest]) -> list[ToolOutcome]:
        """Dispatch ``calls``; results come back in emitted order."""
        if self.max_concurrent <= 1 or len(calls) <= 1:
            out = []
            for call in calls:  # a plain loop: an async comprehension is one more coroutine
                if telemetry.tracer() is not None:
                    out.append(await self.dispatch_one(call))
                    continue
                # a synchronous handler's call completes here, without a coroutine of its own
                started = time.perf_counter()
                ready = self._decide(call, started)
                if isinstance(ready, ToolOutcome):
                    out.append(ready)
                    continue
                value, status, error, pending = self._attempt(ready[0])
                if pending or (status == "error" and self.tool_retries):
                    first = (value, status, error, pending)
                    out.append(await self._attempts(call, started, ready, first))
                else:
                    out.append(self._outcome(call, started, ready, value, status, error, 1))
            return out
        gate = asyncio.Semaphore(self.max_concurrent)

        async def bounded(call: ToolCallRequest) -> ToolOutcome:
            async with gate:
                return await self.dispatch_one(call)

        return list(await asyncio.gather(*(bounded(c) for c in calls)))

    async def dispatch_one(self, req: ToolCallRequest) -> ToolOutcome:
        """Decide and run one call (an ``execute_tool`` span with the ``otel`` extra)."""
        if telemetry.tracer() is None:  # no spans wanted: skip building their attributes
            return await self._dispatch_one(req)
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": req.name,
            "gen_ai.tool.call.id": req.id,
        }
        with telemetry.span(f"execute_tool {req.name}", attributes) as current:
            outcome = await self._dispatch_one(req)
            telemetry.annotate(current, telemetry.tool_attributes(outcome))
            if not outcome.ok:
                telemetry.error(current, outcome.status)
            return outcome

    async def _dispatch_one(self, req: ToolCallRequest) -> ToolOutcome:
        started = time.perf_counter()
        ready = self._decide(req, started)
        if isinstance(ready, ToolOutcome):
            return ready
        return await self._attempts(req, started, ready, None)

    def _decide(
        self, req: ToolCallRequest, started: float
    ) -> ToolOutcome | tuple[ToolCall, Decision]:
        """The policy's decision on ``req``: the allowed call, or the outcome that ends it."""
        args = dict(req.arguments)
        if req.parse_error is not None:
            bad: dict[str, Any] = {"status": "error", "error": req.parse_error}
            return ToolOutcome(
                req.id, req.name or "<invalid>", args, "error", bad, render(bad), req.parse_error
            )
        validate = self._validators.get(req.name, _UNSET)
        if validate is _UNSET:
            validate = self._validator_for(req.name)
        invalid: InvalidArguments | None = None
        if validate is not None:
            try:
                args = validate(args)  # the policy decides what the handler will receive
            except InvalidArguments as exc:
                invalid = exc  # a denial of the raw arguments still wins (below)
        call = self._call_for(req.name, args)
        t0 = time.perf_counter_ns()
        decision = decide_current(call, context=self.context)
        self.policy_ns += time.perf_counter_ns() - t0
        self.decisions += 1
        if not decision.allowed:
            receipt = decision.permission_denied()
            return ToolOutcome(
                req.id,
                call.name,
                args,
                "permission_denied",
                receipt,
                render(receipt),
                decision.reason,
                decision.to_dict(),
                0,
                (time.perf_counter() - started) * 1000,
            )
        if invalid is not None:
            # never into the handler: back to the model as a retryable error naming the field
            bad = invalid.observation()
            return ToolOutcome(
                req.id,
                call.name,
                args,
                "error",
                bad,
                render(bad),
                str(invalid),
                decision.to_dict(),
            )
        if call.name not in self.registry:
            err: dict[str, Any] = {
                "status": "unknown_tool",
                "error": f"unknown tool '{call.name}'",
                "available": sorted(self.registry),
            }
            return ToolOutcome(
                req.id,
                call.name,
                args,
                "unknown_tool",
                err,
                render(err),
                str(err["error"]),
                decision.to_dict(),
            )
        return call, decision

    def _attempt(self, call: ToolCall) -> tuple[Any, str, str | None, bool]:
        """An attempt's synchronous part: ``(value, status, error, pending)``; when
        ``pending``, ``value`` is the handler's awaitable, still to be awaited."""
        try:
            value = self._call(call) if self._direct else self.executor(call)
            if _awaitable(value):
                return value, "error", None, True
            status, error = _status_of(value)
        except Exception as exc:  # a handler error is an observation, not a crash
            if isinstance(exc, ScopeViolation):
                raise
            value = {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
            status, error = "error", str(value["error"])
        return value, status, error, False

    async def _attempts(
        self,
        req: ToolCallRequest,
        started: float,
        ready: tuple[ToolCall, Decision],
        first: tuple[Any, str, str | None, bool] | None,
    ) -> ToolOutcome:
        """Run the allowed call with its retries (``first``: what attempt 1's synchronous
        part gave, when it already ran; its value is still to be awaited when pending)."""
        call = ready[0]
        value: Any = None
        status: str = "error"
        error: str | None = None
        attempts = 0
        for attempt in range(self.tool_retries + 1):
            attempts = attempt + 1
            if attempt or first is None:
                value, status, error, pending = self._attempt(call)
            else:
                value, status, error, pending = first
            if pending:
                try:
                    value = await value
                    status, error = _status_of(value)
                except Exception as exc:  # a handler error is an observation, not a crash
                    if isinstance(exc, ScopeViolation):
                        raise
                    value = {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
                    status, error = "error", str(value["error"])
            if status != "error" or attempt == self.tool_retries:
                break
            if self.tool_backoff_ms:
                await self._sleep(self.tool_backoff_ms * (2**attempt) / 1000)
        return self._outcome(req, started, ready, value, status, error, attempts)

    def _outcome(
        self,
        req: ToolCallRequest,
        started: float,
        ready: tuple[ToolCall, Decision],
        value: Any,
        status: str,
        error: str | None,
        attempts: int,
    ) -> ToolOutcome:
        call, decision = ready
        audit = value.get("audit", {}) if isinstance(value, dict) else {}
        recorded = _decision_dict(decision)
        if status in ("permission_denied", "scope_violation") and isinstance(value, dict):
            # the stack allowed it and a gate (approvals, a scoped executor) refused it:
            # the record says who refused and why, not "allowed by all N frame(s)"
            recorded = _refusal(value, recorded, status)
        return ToolOutcome(
            req.id,
            call.name,
            call.arguments,  # type: ignore[arg-type]  # the dict _decide made
            status,
            value,
            render(value),
            error,
            recorded,
            attempts,
            (time.perf_counter() - started) * 1000,
            audit if isinstance(audit, dict) else {},
        )

    async def _execute(self, call: ToolCall) -> Any:
        """The base executor: run the handler of an allowed call."""
        result = self._call(call)
        if _awaitable(result):
            result = await result
        return result

    def _call(self, call: ToolCall) -> Any:
        """Call the handler: its value, or an awaitable of it (async handlers, threads)."""
        tool = self.registry[call.name]
        kwargs = call.arguments  # ``**`` hands the handler a dict of its own
        if tool.is_async:
            return tool.handler(**kwargs)
        if self.max_concurrent > 1:
            return asyncio.to_thread(tool.handler, **kwargs)
        return tool.handler(**kwargs)


def _decision_dict(decision: Decision) -> dict[str, Any]:
    """``decision.to_dict()``, a fresh dict each time, copied from one built once per
    decision (an allowed tool's calls share their memoised decision)."""
    hit = _DICTS.get(id(decision))
    if hit is None or hit[0] is not decision:
        hit = (decision, decision.to_dict())
        if len(_DICTS) >= 256:
            _DICTS.clear()
        _DICTS[id(decision)] = hit  # the entry holds the decision: its id is not reused
    out = dict(hit[1])
    if out["frame"] is not None:
        out["frame"] = dict(out["frame"])
    return out


_DICTS: dict[int, tuple[Decision, dict[str, Any]]] = {}


def _refusal(receipt: dict[str, Any], allowed: dict[str, Any], status: str) -> dict[str, Any]:
    """The decision record of a call the stack allowed and a gate then refused: the
    gate's receipt (``policyDecision`` of an approval rule, or a scope violation's frame,
    dimension and rule) in the shape of :meth:`charter.policy.Decision.to_dict`."""
    approval = receipt.get("policyDecision")
    approval = approval if isinstance(approval, dict) else {}
    label = receipt.get("frame") or approval.get("policy")
    kind = "approval" if approval else "scope"
    return {
        "decision": "deny",
        "tool": allowed.get("tool"),
        "reason": str(receipt.get("reason") or approval.get("rationale") or status),
        "frame": None if label is None else {"index": None, "label": label, "kind": kind},
        "dimension": receipt.get("dimension") or ("approval" if approval else None),
        "rule": receipt.get("rule") or approval.get("rule"),
        "subject": allowed.get("subject"),
    }


#: Result types that are never awaitable: a handler's usual answers skip the ABC check.
_PLAIN = frozenset({str, dict, list, tuple, int, float, bool, bytes, type(None)})


def _awaitable(value: Any) -> bool:
    """``inspect.isawaitable``, answered at once for coroutines and plain values."""
    kind = type(value)
    if kind is types.CoroutineType:
        return True
    return kind not in _PLAIN and inspect.isawaitable(value)
