"""The autonomy gate: a ``tool_caller`` middleware that enforces the run's tier in-process.

The agent's dispatcher decides every call with :func:`charter.policy.decide_current`
first; a denied call never reaches this gate. For an *allowed* side-effecting call:

- ``shadow``: nothing executes; the call becomes a dry-run receipt;
- ``suggest``: nothing executes; the call becomes a proposal returned in the run result;
- ``act_with_approval``: the decision becomes ``Outcome.ASK``; the approval hook (TTY,
  callback, or a durable pending approval in the log) decides; only ``granted`` executes;
- ``act_auto``: executes.

Read-only calls pass through untouched (no receipt), but every call the gate sees, read-only
ones included, is kept in the run record's ``tool_calls`` with its ``started_at`` and
``ended_at`` (the console draws a run's timeline from them). Executed side-effecting calls
are bracketed by ``persona.tool.executing`` / ``persona.tool.executed`` receipts; with
``receipt_policy = "required"`` a receipt that cannot be written stops the call and the run.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

from charter.policy import (
    Decision,
    Outcome,
    PathContext,
    ToolCall,
    current_stack,
    decide_current,
)
from charter.runtime import format_time

from .approvals import (
    ApprovalVerdict,
    Approver,
    approval_id,
    decided,
    requested,
    resolve_approval,
    wait_for_resolution,
)
from .control import RunControl
from .errors import ApprovalError, ReceiptError
from .events import RunKind
from .parking import ReplayDiverged, RunParked
from .tiers import ACT_WITH_APPROVAL, SHADOW, SUGGEST, is_side_effecting

Executor = Callable[[ToolCall], Any]
RESULT_CHARS = 600


def summarize(value: Any, limit: int = RESULT_CHARS) -> str:
    try:
        text = value if isinstance(value, str) else json.dumps(value, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def current_stage() -> str | None:
    for frame in reversed(current_stack()):
        if frame.kind == "stage":
            return frame.stage
    return None


def current_frames() -> list[str]:
    return [frame.label for frame in current_stack()]


class AutonomyGate:
    """Enforces ``control.tier`` on allowed side-effecting calls."""

    def __init__(
        self,
        control: RunControl,
        *,
        context: PathContext,
        approver: Approver | None,
        wait: Callable[[dict[str, Any]], ApprovalVerdict | None] | None = None,
        notify: Callable[[str], None] = lambda _message: None,
    ) -> None:
        self.control = control
        self.context = context
        self.approver = approver
        self.wait = wait
        self.notify = notify
        #: Tool name -> its ``preview`` (:attr:`charter.agent.Tool.preview`): the request a
        #: dry run, proposal or approval request records for the call.
        self.previews: dict[str, Callable[[Any], Any]] = {}

    def middleware(self, inner: Executor) -> Executor:
        async def gated(call: ToolCall) -> Any:
            return await self.gate(call, inner)

        return gated

    async def gate(self, call: ToolCall, inner: Executor) -> Any:
        control = self.control
        if control.stopping:
            return {"status": "error", "error": "the run is stopping; no further calls execute"}
        started = format_time(control.receipts.clock())
        if not is_side_effecting(call.annotations):
            return await self._read_only(call, inner, started)
        call_id = control.next_call_id()
        if control.replay is not None:  # resuming a parked run (charter.run.parking)
            try:
                entry = control.replay.tool(call_id, call.name)
            except ReplayDiverged as exc:
                control.fatal = str(exc)
                return {"status": "error", "error": str(exc)}
            if entry is not None:
                control.journal.tools[call_id] = entry
                control.tool_calls.append(
                    {"call_id": call_id, "tool": call.name, "status": "replayed",
                     **self._span(started)}
                )  # fmt: skip
                return entry.get("result")
        allowed = decide_current(call, context=self.context)
        base: dict[str, Any] = {
            "call_id": call_id,
            "tool": call.name,
            "arguments": dict(call.arguments),
            "side_effect_level": call.annotations.effective_level.label,
            "tier": control.tier,
            "stage": current_stage(),
            "frames": current_frames(),
        }
        preview = self.previews.get(call.name)
        if preview is not None:
            base["request"] = _preview(preview, call)
        span: dict[str, Any] = {"started_at": started}  # the record's timing, not receipts'
        try:
            if control.tier == SHADOW:
                entry = control.receipts.receipt(
                    RunKind.TOOL_DRY_RUN, {**base, "decision": allowed.to_dict()}
                )
                record = {**base, "receipt_id": entry["receipt_id"] if entry else None}
                control.dry_runs.append(record)
                control.tool_calls.append({**record, "status": "dry_run", **self._span(started)})
                return {
                    "status": "dry_run",
                    "executed": False,
                    "call_id": call_id,
                    "receipt_id": record["receipt_id"],
                    "message": f"shadow mode: {call.name} was recorded as a dry run, not executed",
                }
            if control.tier == SUGGEST:
                entry = control.receipts.receipt(
                    RunKind.TOOL_PROPOSED, {**base, "decision": allowed.to_dict()}
                )
                record = {**base, "receipt_id": entry["receipt_id"] if entry else None}
                control.proposals.append(record)
                control.tool_calls.append({**record, "status": "proposed", **self._span(started)})
                return {
                    "status": "proposed",
                    "executed": False,
                    "call_id": call_id,
                    "receipt_id": record["receipt_id"],
                    "message": f"suggest mode: {call.name} was returned as a proposal for a human",
                }
            if control.tier == ACT_WITH_APPROVAL:
                verdict = self._approve(call, base)
                approval = {**base, **verdict.to_dict()}
                control.approvals.append(approval)
                span["approval"] = {"status": verdict.status, "by": verdict.by}
                if not verdict.granted:
                    control.approval_denied = True
                    control.tool_calls.append(
                        {**base, "status": f"approval_{verdict.status}", **span,
                         **self._span(started)}
                    )  # fmt: skip
                    return {
                        "status": f"approval_{verdict.status}",
                        "executed": False,
                        "call_id": call_id,
                        "by": verdict.by,
                        "reason": verdict.reason,
                        "message": f"{call.name} was not approved ({verdict.status}); "
                        "it did not execute",
                    }
            control.receipts.receipt(
                RunKind.TOOL_EXECUTING, {**base, "decision": allowed.to_dict()}
            )
        except ReceiptError as exc:
            control.fatal = str(exc)
            control.tool_calls.append(
                {**base, "status": "receipt_failed", **span, **self._span(started)}
            )
            return {"status": "error", "error": f"{exc}; the call did not execute"}
        status = "error"
        value: Any = None
        try:
            value = await _await(inner(call))
            status = _status(value)
            return value
        except Exception as exc:
            value = {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
            raise
        finally:
            control.tool_calls.append(
                {**base, "status": status, "executed": True, **span, **self._span(started)}
            )
            entry = {"tool": call.name, "result": _jsonable(value)}
            control.journal.tools[call_id] = entry
            try:
                control.receipts.journal(
                    RunKind.TOOL_EXECUTED,
                    {**base, "status": status, "result": summarize(value)},
                    {"call_id": call_id, **entry},
                )
            except ReceiptError as exc:
                control.fatal = str(exc)

    def _span(self, started: str) -> dict[str, str]:
        return {"started_at": started, "ended_at": format_time(self.control.receipts.clock())}

    async def _read_only(self, call: ToolCall, inner: Executor, started: str) -> Any:
        """Run a read-only call untouched, keeping it (and its timing) in the run record."""
        control = self.control
        control.reads += 1
        entry: dict[str, Any] = {
            "call_id": f"read_{control.reads}",  # apart from call_N: approvals and replay use those
            "tool": call.name,
            "arguments": _jsonable(dict(call.arguments)),
            "side_effect_level": call.annotations.effective_level.label,
            "stage": current_stage(),
        }
        status = "error"
        try:
            value = await _await(inner(call))
            status = _status(value)
            return value
        finally:
            control.tool_calls.append(
                {**entry, "status": status, "executed": True, **self._span(started)}
            )

    def _approve(self, call: ToolCall, base: dict[str, Any]) -> ApprovalVerdict:
        control = self.control
        # what asks is the tier (a layer over the policy stack): name it as the frame and
        # the rule (the tier's reason: the manifest's tier, a rollout cap, a demotion, ...)
        ask = Decision(
            Outcome.ASK,
            call.name,
            f"autonomy tier {control.tier}: a {base['side_effect_level']} call needs approval",
            frame_index=len(current_stack()),
            frame_label=f"autonomy tier {control.tier}",
            frame_kind="autonomy",
            dimension="autonomy_tier",
            rule=control.tier_reason or f"autonomy_tier = {control.tier}",
        )
        aid = approval_id(control.run_id, base["call_id"])
        mode = self.approver.mode if self.approver is not None else "log"
        if control.park and control.replay is not None:
            # the parked attempt recorded this request already: never ask twice
            verdict = decided(control.receipts.runtime.log, control.persona, aid)
            if verdict is not None:
                return verdict
            if requested(control.receipts.runtime.log, control.persona, aid):
                raise RunParked(aid, base["call_id"], call.name)
        request = control.receipts.mechanism(
            RunKind.APPROVAL_REQUESTED,
            {**base, "approval_id": aid, "decision": ask.to_dict(), "mode": mode},
        )
        request = {**request, "persona": control.persona}
        runtime = control.receipts.runtime
        clock = control.receipts.clock
        if self.approver is not None:
            granted, by, reason = self.approver(request)
            entry = resolve_approval(
                runtime,
                control.run_id,
                base["call_id"],
                status="granted" if granted else "denied",
                at=clock(),
                by=by,
                reason=reason,
                require_live=False,
            )
            return _verdict(entry)
        if self.wait is None:
            raise ReceiptError("no approval hook and no durable approval wait configured")
        if control.park:
            # serve: give the lease back instead of holding a worker (charter.run.parking)
            verdict = decided(control.receipts.runtime.log, control.persona, aid)
            if verdict is not None:
                return verdict
            raise RunParked(aid, base["call_id"], call.name)
        self.notify(
            f"waiting for approval: charter approve {control.run_id} {base['call_id']}   "
            f"(or: charter deny {control.run_id} {base['call_id']})"
        )
        verdict = self.wait(request)
        if verdict is not None:
            return verdict
        try:
            entry = resolve_approval(
                runtime,
                control.run_id,
                base["call_id"],
                status="expired",
                at=clock(),
                by="timeout",
                reason="no decision before the approval timeout",
                require_live=False,
            )
        except ApprovalError:
            # decided at the last moment: read the decision
            late = self.wait({**request, "timeout": 0})
            if late is not None:
                return late
            raise
        return _verdict(entry)


def _preview(preview: Callable[[Any], Any], call: ToolCall) -> Any:
    try:
        return _jsonable(preview(dict(call.arguments)))
    except Exception as exc:  # a preview never stops the call it describes
        return {"error": f"no preview: {type(exc).__name__}: {exc}"}


def _verdict(entry: dict[str, Any]) -> ApprovalVerdict:
    return ApprovalVerdict(
        entry["status"],
        entry.get("by"),
        entry.get("reason"),
        entry.get("receipt_id"),
        entry.get("event_id"),
    )


def durable_wait(
    control: RunControl,
    *,
    timeout: float | None,
    heartbeat: Callable[[], None],
    heartbeat_every: float,
) -> Callable[[dict[str, Any]], ApprovalVerdict | None]:
    """A wait that polls the log for the decision and renews the run's lease meanwhile."""
    import time

    def wait(request: dict[str, Any]) -> ApprovalVerdict | None:
        last = [time.monotonic()]

        def idle() -> None:
            now = time.monotonic()
            if now - last[0] >= heartbeat_every:
                last[0] = now
                heartbeat()

        limit = request.get("timeout", timeout)
        return wait_for_resolution(
            control.receipts.runtime.log,
            control.persona,
            request["approval_id"],
            after_event_id=int(request["event_id"]) - 1,
            timeout=None if limit is None else float(limit),
            on_idle=idle,
        )

    return wait


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


async def _await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


def _status(value: Any) -> str:
    if isinstance(value, dict):
        if value.get("error") == "permission_denied":
            return "permission_denied"
        status = value.get("status")
        if isinstance(status, str):
            return status
    return "ok"


__all__ = ["AutonomyGate", "current_stage", "durable_wait", "summarize"]
