"""Approvals inside ``agent_loop``: ``approval_policy``, ``permissions``, ``on_escalation``.

The capability stack decides first (a denied call never gets here). For an allowed call
this gate asks two :class:`~charter.policy.approval.ApprovalPolicy` s, both written in the
policy language: ``approval_policy`` (declarative rules) and ``permissions`` (per-agent
allow/deny lists; a call outside a non-empty ``allow`` list escalates). ``deny`` refuses;
``ask`` escalates to ``on_escalation`` (``{grant: "once"}``, ``{grant: "session"}``,
``True`` or ``False``) or, without one, to the durable approvals of :mod:`charter.run`
(``approval_store``: one store, answered by ``charter approve`` / ``charter deny`` from any
process). A wait that times out is recorded as expired and the call does not run: an
approval never expires into an allow. With neither, an ``ask`` is refused (fail closed).

Transcript events: ``PermissionEscalation``, ``PermissionGrant``, ``PermissionDeny``, each
with the ``policyDecision`` receipt (matched rule and rationale).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from charter.policy import Decision, Outcome, PolicyError, ToolCall
from charter.policy.approval import ApprovalPolicy, CallFacts, policy_decision_receipt

from .hooks import LoopHook
from .options import AgentOptionError

Executor = Callable[[ToolCall], Any]
_log = logging.getLogger("charter.agent")


def _notify(message: str) -> None:
    _log.warning("%s", message)


@dataclass(frozen=True)
class PermissionRequest:
    """What ``on_escalation`` is asked about."""

    session_id: str
    tool: str
    arguments: dict[str, Any]
    reason: str
    rule: str | None
    policyDecision: dict[str, Any]  # the seed's receipt name

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _entry_rule(entry: Any, decision: str, path: str) -> dict[str, Any]:
    if isinstance(entry, str):
        return {"decision": decision, "name": f"{path}:{entry}", "match": {"tools": [entry]}}
    if callable(entry):
        name = getattr(entry, "__name__", "predicate")
        return {"decision": decision, "name": f"{path}:{name}", "match": {"predicate": entry}}
    if isinstance(entry, Mapping):
        match: dict[str, Any] = {}
        if entry.get("tool") is not None:
            match["tools"] = [entry["tool"]]
        if entry.get("args") is not None:
            match["args"] = entry["args"]
        for key, value in entry.items():
            if key not in ("tool", "args"):
                match[key] = value
        return {"decision": decision, "name": f"{path}:{entry.get('tool', 'args')}", "match": match}
    raise AgentOptionError(
        path, f"expected a tool-name glob, an argument pattern or a predicate, got {entry!r}"
    )


def permissions_policy(spec: Any) -> ApprovalPolicy:
    """``permissions = {allow: [...], deny: [...]}`` as an approval policy."""
    if not isinstance(spec, Mapping) or set(spec) - {"allow", "deny"}:
        raise AgentOptionError("permissions", "expected a dict with allow and/or deny lists")
    rules: list[dict[str, Any]] = []
    for key in ("deny", "allow"):
        entries = spec.get(key) or []
        if not isinstance(entries, (list, tuple)):
            raise AgentOptionError(f"permissions.{key}", "expected a list")
        rules.extend(_entry_rule(e, key, f"permissions.{key}[{i}]") for i, e in enumerate(entries))
    default = "ask" if spec.get("allow") else "allow"
    try:
        return ApprovalPolicy.from_dict({"rules": rules, "default": default}, label="permissions")
    except PolicyError as exc:
        raise AgentOptionError("permissions", str(exc)) from None


class DurableApprovals:
    """``ask`` answered through :mod:`charter.run`'s approval events (any process decides)."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        unknown = set(spec) - {"state", "state_dir", "persona", "timeout", "by"}
        if unknown:
            raise AgentOptionError("approval_store", f"unknown key(s) {', '.join(sorted(unknown))}")
        if not spec.get("state") and not spec.get("state_dir"):
            raise AgentOptionError(
                "approval_store", "needs state (postgresql://...) or state_dir (SQLite dir)"
            )
        self.url = spec.get("state")
        self.state_dir = spec.get("state_dir")
        self.persona = str(spec.get("persona") or "agent_loop")
        timeout = spec.get("timeout")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0
        ):
            raise AgentOptionError("approval_store.timeout", "expected seconds (>= 0) or None")
        self.timeout: float | None = None if timeout is None else float(timeout)

    def ask(
        self, session_id: str, request: PermissionRequest, notify: Callable[[str], None]
    ) -> tuple[bool, str | None, str | None, str]:
        """Record the request, wait for the decision; ``(granted, by, reason, status)``."""
        from datetime import timedelta

        from charter.run.approvals import resolve_approval, wait_for_resolution
        from charter.run.events import RunKind
        from charter.runtime import PersonaRuntime, format_time, open_event_log
        from charter.runtime.clock import utc_now

        log = open_event_log(state_dir=self.state_dir, url=self.url)
        try:
            runtime = PersonaRuntime(log, {}, actor="agent_loop")
            call_id = f"call_{uuid.uuid4().hex[:10]}"
            now = utc_now()
            deadline = None if self.timeout is None else now + timedelta(seconds=self.timeout)
            approval = f"{session_id}/{call_id}"
            payload: dict[str, Any] = {
                "run_id": session_id,
                "call_id": call_id,
                "approval_id": approval,
                "tool": request.tool,
                "arguments": request.arguments,
                "side_effect_level": None,
                "source": "agent_loop",
                "deadline": None if deadline is None else format_time(deadline),
                "policyDecision": request.policyDecision,
                "mode": "log",
            }
            event = runtime.transact(
                now, lambda b: b.emit(self.persona, RunKind.APPROVAL_REQUESTED, payload)
            )
            notify(
                f"waiting for approval: charter approve {session_id} {call_id}   "
                f"(or: charter deny {session_id} {call_id})"
            )
            verdict = wait_for_resolution(
                log,
                self.persona,
                approval,
                after_event_id=event.event_id,
                timeout=self.timeout,
            )
            if verdict is None:
                try:
                    resolve_approval(
                        runtime,
                        session_id,
                        call_id,
                        status="expired",
                        at=utc_now(),
                        by="timeout",
                        reason="no decision before the approval timeout",
                        require_live=False,
                    )
                except Exception:  # decided at the last moment: read it
                    verdict = wait_for_resolution(
                        log, self.persona, approval, after_event_id=0, timeout=0
                    )
                if verdict is None:
                    return False, "timeout", "no decision before the approval timeout", "expired"
            return verdict.granted, verdict.by, verdict.reason, verdict.status
        finally:
            log.close()


class ApprovalGate(LoopHook):
    """The loop's approval step, outermost around every allowed tool call."""

    def __init__(
        self,
        approval: ApprovalPolicy | None,
        permissions: ApprovalPolicy | None,
        on_escalation: Callable[[PermissionRequest], Any] | None,
        store: DurableApprovals | None,
        labels: Mapping[str, str | None],
    ) -> None:
        self.approval = approval
        self.permissions = permissions
        self.on_escalation = on_escalation
        self.store = store
        self.labels = dict(labels)
        self.counts: dict[str, int] = {}
        self.session_grants: set[tuple[str | None, str]] = set()
        self.run: Any = None

    async def on_start(self, run: Any, stack: Any) -> None:
        self.run = run
        run.gates.append(self.middleware)

    def middleware(self, inner: Executor) -> Executor:
        async def gated(call: ToolCall) -> Any:
            return await self.gate(call, inner)

        return gated

    def _decide(self, call: ToolCall) -> Decision:
        facts = CallFacts(
            calls_before=self.counts.get(call.name, 0),
            agent=self.labels.get("agent"),
        )
        self.counts[call.name] = facts.calls_before + 1
        context = self.run.dispatcher.context if self.run and self.run.dispatcher else None
        found: list[Decision] = []
        for policy in (self.permissions, self.approval):
            if policy is not None:
                found.append(policy.decide(call, context=context, facts=facts))
        rank = {Outcome.ALLOW: 0, Outcome.ASK: 1, Outcome.DENY: 2}
        return max(found, key=lambda d: rank[d.outcome])

    def _event(self, kind: str, call: ToolCall, decision: Decision, **data: Any) -> None:
        self.run.event(
            kind,
            session_id=self.run.cfg.session_id,
            tool=call.name,
            policyDecision=policy_decision_receipt(decision),
            **data,
        )

    def _refuse(self, call: ToolCall, decision: Decision, reason: str) -> dict[str, Any]:
        return {
            "error": "permission_denied",
            "tool": call.name,
            "reason": reason,
            "policyDecision": policy_decision_receipt(decision),
        }

    async def gate(self, call: ToolCall, inner: Executor) -> Any:
        decision = self._decide(call)
        if decision.outcome is Outcome.DENY:
            self._event("PermissionDeny", call, decision, reason=decision.reason)
            return self._refuse(call, decision, decision.reason)
        if decision.outcome is Outcome.ASK:
            key = (decision.rule, call.name)
            if key in self.session_grants:
                self._event("PermissionGrant", call, decision, grant="session", cached=True)
            else:
                granted, why = await self._escalate(call, decision, key)
                if not granted:
                    return self._refuse(call, decision, why)
        result = inner(call)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def _escalate(
        self, call: ToolCall, decision: Decision, key: tuple[str | None, str]
    ) -> tuple[bool, str]:
        request = PermissionRequest(
            session_id=self.run.cfg.session_id,
            tool=call.name,
            arguments=dict(call.arguments),
            reason=decision.reason,
            rule=decision.rule,
            policyDecision=policy_decision_receipt(decision),
        )
        self._event("PermissionEscalation", call, decision, arguments=dict(call.arguments))
        if self.on_escalation is not None:
            answer = self.on_escalation(request)
            if inspect.isawaitable(answer):
                answer = await answer
            grant: str | None = None
            if answer is True:
                grant = "once"
            elif isinstance(answer, Mapping) and answer.get("grant") in ("once", "session"):
                grant = str(answer["grant"])
            if grant is None:
                why = f"{decision.reason}; on_escalation refused"
                self._event("PermissionDeny", call, decision, reason=why, by="on_escalation")
                return False, why
            if grant == "session":
                self.session_grants.add(key)
            self._event("PermissionGrant", call, decision, grant=grant, by="on_escalation")
            return True, ""
        if self.store is not None:
            granted, by, reason, status = await asyncio.to_thread(
                self.store.ask, self.run.cfg.session_id, request, _notify
            )
            if granted:
                self._event("PermissionGrant", call, decision, grant="once", by=by)
                return True, ""
            why = (
                f"approval {status}"
                + (f" by {by}" if by else "")
                + (f": {reason}" if reason else "")
            )
            self._event("PermissionDeny", call, decision, reason=why, by=by, status=status)
            return False, why
        why = (
            f"{decision.reason}; approval needed but no on_escalation or approval_store "
            "is configured"
        )
        self._event("PermissionDeny", call, decision, reason=why)
        return False, why


def approvals_hook(options: Mapping[str, Any]) -> ApprovalGate | None:
    """The gate the options ask for, or ``None`` when no approval option is set."""
    approval = options.get("approval_policy")
    permissions = options.get("permissions")
    on_escalation = options.get("on_escalation")
    store_spec = options.get("approval_store")
    if approval is None and permissions is None:
        if on_escalation is not None or store_spec is not None:
            raise AgentOptionError(
                "on_escalation" if on_escalation is not None else "approval_store",
                "needs approval_policy or permissions (nothing would ever ask)",
            )
        return None
    policy = None
    if approval is not None:
        if isinstance(approval, ApprovalPolicy):
            policy = approval
        else:
            try:
                policy = ApprovalPolicy.from_dict(approval)
            except PolicyError as exc:
                raise AgentOptionError("approval_policy", str(exc)) from None
    perms = None if permissions is None else permissions_policy(permissions)
    if on_escalation is not None and not callable(on_escalation):
        raise AgentOptionError("on_escalation", "expected a callable")
    store = None
    if store_spec is not None:
        if not isinstance(store_spec, Mapping):
            raise AgentOptionError("approval_store", "expected a dict")
        store = DurableApprovals(store_spec)
    labels = {"agent": options.get("policy_label") or "agent_loop"}
    return ApprovalGate(policy, perms, on_escalation, store, labels)
