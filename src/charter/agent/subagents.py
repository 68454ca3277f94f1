"""``sub_agent_run``: a child agent loop that is narrower than its parent by construction.

- **Policy.** The child runs in the parent's context, so every frame of the parent's
  stack is below it; its request (``allowed_tools``, ``policy``) is pushed on top as one
  ``kind="sub_agent"`` frame. Frames only intersect, so the child's allowed set is a
  subset of the parent's; :func:`child_policy` computes the same intersection as one
  :class:`~charter.policy.Policy` (what a persisted worker carries across processes).
- **Budget.** Tokens are accounted in a :class:`TokenLedger` held in a ``ContextVar``.
  A child reserves ``min(token_budget, parent remaining)`` from its parent before its
  first model call (so concurrent children cannot over-commit) and settles what it used
  when it ends; the child's model calls are refused once its reservation is spent.
- **Isolation.** The parent sees one envelope; the child's transcript stays in its own
  session, reachable by the ``transcript`` handle (:func:`sub_agent_transcript`).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from charter.policy import (
    Frame,
    Policy,
    Rules,
    SideEffectLevel,
    ToolAnnotations,
    combined_policy,
    with_execution_policy,
)
from charter.policy.names import canonical_name

from .callers import LlmCaller, call_caller, default_llm_caller, with_retry
from .options import AgentOptionError, check_known
from .providers import ProviderError
from .result import AgentResult
from .sync import run_sync
from .tools import Tool, as_tools

# -- budgets ------------------------------------------------------------------------


def child_budget(parent_remaining: int | None, requested: int | None) -> int | None:
    """A child's token budget: what it asked for, never more than the parent has left
    (``None`` = unlimited, only when both are unlimited)."""
    if parent_remaining is None:
        return requested
    if requested is None:
        return parent_remaining
    return max(0, min(requested, parent_remaining))


@dataclass
class TokenLedger:
    """Tokens one agent may spend: ``limit`` (``None`` = unlimited), ``used`` by its own
    model calls and settled children, ``reserved`` for children still running."""

    limit: int | None = None
    used: int = 0
    reserved: int = 0
    label: str = "root"
    children: list[TokenLedger] = field(default_factory=list, repr=False)

    @property
    def remaining(self) -> int | None:
        if self.limit is None:
            return None
        return max(0, self.limit - self.used - self.reserved)

    @property
    def exhausted(self) -> bool:
        return self.limit is not None and self.used >= self.limit

    def reserve(self, requested: int | None, label: str) -> TokenLedger:
        """A child ledger whose limit is held back from this one until :meth:`settle`."""
        child = TokenLedger(child_budget(self.remaining, requested), label=label)
        if self.limit is not None and child.limit is not None:
            self.reserved += child.limit
        self.children.append(child)
        return child

    def settle(self, child: TokenLedger) -> None:
        """Release ``child``'s reservation and charge what it used."""
        if self.limit is not None and child.limit is not None:
            self.reserved -= child.limit
        self.used += child.used

    def charge(self, tokens: int) -> None:
        self.used += max(0, tokens)


_LEDGER: ContextVar[TokenLedger | None] = ContextVar("charter_token_ledger", default=None)


def current_ledger() -> TokenLedger | None:
    """The token ledger of the agent running in this context (``None`` at the top)."""
    return _LEDGER.get()


def budget_caller(ledger: TokenLedger, inner: LlmCaller) -> LlmCaller:
    """An ``llm_caller`` that refuses calls once ``ledger`` is spent and charges usage."""

    async def caller(call: dict[str, Any]) -> dict[str, Any]:
        if ledger.exhausted:
            return {
                "ok": False,
                "status": "budget_exhausted",
                "error": ProviderError(
                    f"token budget of {ledger.limit} spent ({ledger.used} used)",
                    category="budget",
                    reason="token_budget_exceeded",
                    kind="TokenBudgetExceeded",
                    retryable=False,
                ),
            }
        reply = await call_caller(inner, call)
        if reply.get("ok"):
            value = reply["value"]
            ledger.charge(
                int(getattr(value, "input_tokens", 0)) + int(getattr(value, "output_tokens", 0))
            )
        return reply

    return caller


# -- policy -------------------------------------------------------------------------


def child_policy(parent: Sequence[Frame], request: Policy) -> Policy:
    """The child's whole policy as one frame: the parent stack intersected with its request."""
    return combined_policy(parent).intersect(request)


# -- the request --------------------------------------------------------------------

_REQUEST_KEYS = (
    "system",
    "tools",
    "allowed_tools",
    "policy",
    "token_budget",
    "returns",
    "session_id",
    "parent_session_id",
    "name",
)


@dataclass
class SubAgentRequest:
    """A normalised child request (seed 001 ``sub_agent_request``)."""

    task: str
    system: str | None
    tools: list[Tool]
    allowed_tools: tuple[str, ...] | None
    policy: Policy
    token_budget: int | None
    returns: dict[str, Any] | None
    session_id: str
    parent_session_id: str | None
    name: str
    options: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "system": self.system,
            "tools": [t.name for t in self.tools],
            "allowed_tools": None if self.allowed_tools is None else list(self.allowed_tools),
            "policy": self.policy.to_dict(),
            "token_budget": self.token_budget,
            "returns": self.returns,
            "session_id": self.session_id,
            "parent_session_id": self.parent_session_id,
            "name": self.name,
            "options": {k: v for k, v in self.options.items() if _jsonable(v)},
        }

    def frame_policy(self) -> Policy:
        """The request as a policy: ``policy`` narrowed further by ``allowed_tools``."""
        if self.allowed_tools is None:
            return self.policy
        return self.policy.intersect(Policy(tools=Rules((self.allowed_tools,))))


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def sub_agent_request(task: str, **options: Any) -> SubAgentRequest:
    """Normalise a child request; bad fields raise :class:`AgentOptionError` naming them."""
    if not isinstance(task, str) or not task.strip():
        raise AgentOptionError("task", "expected a non-empty string")
    opts = dict(options)
    rest = {k: v for k, v in opts.items() if k not in _REQUEST_KEYS}
    check_known(rest)  # the child's agent_loop options fail here, not inside a worker
    if "llm_caller" in rest and not callable(rest["llm_caller"]):
        raise AgentOptionError("llm_caller", "expected a callable")
    try:
        tools = as_tools(opts.get("tools"))
    except TypeError as exc:
        raise AgentOptionError("tools", str(exc)) from exc
    allowed = opts.get("allowed_tools")
    if allowed is not None:
        if not isinstance(allowed, (list, tuple)) or not all(isinstance(a, str) for a in allowed):
            raise AgentOptionError(
                "allowed_tools", f"expected a list of tool names, got {allowed!r}"
            )
        allowed = tuple(canonical_name(a) for a in allowed)
        tools = [t for t in tools if canonical_name(t.name) in allowed]
    policy = opts.get("policy")
    if policy is None:
        policy = Policy()
    elif isinstance(policy, Mapping):
        policy = Policy.from_dict(policy, source="sub_agent_run policy")
    elif not isinstance(policy, Policy):
        raise AgentOptionError("policy", "expected a charter.policy.Policy or a policy dict")
    budget = opts.get("token_budget")
    if budget is not None and (
        isinstance(budget, bool) or not isinstance(budget, int) or budget < 0
    ):
        raise AgentOptionError("token_budget", f"expected a non-negative integer, got {budget!r}")
    returns = opts.get("returns")
    if returns is not None:
        if not isinstance(returns, Mapping) or not isinstance(returns.get("schema"), Mapping):
            raise AgentOptionError("returns", "expected {schema: <JSON schema object>}")
        import jsonschema

        try:
            jsonschema.Draft202012Validator.check_schema(dict(returns["schema"]))
        except jsonschema.SchemaError as exc:
            path = ".".join(str(p) for p in exc.path)
            raise AgentOptionError(
                f"returns.schema{'.' + path if path else ''}", exc.message
            ) from exc
        returns = {"schema": dict(returns["schema"])}
    session = opts.get("session_id") or f"sub_{uuid.uuid4().hex[:12]}"
    return SubAgentRequest(
        task=task,
        system=opts.get("system"),
        tools=tools,
        allowed_tools=allowed,
        policy=policy,
        token_budget=budget,
        returns=returns,
        session_id=str(session),
        parent_session_id=opts.get("parent_session_id"),
        name=str(opts.get("name") or "sub_agent"),
        options=rest,
    )


# -- running it ---------------------------------------------------------------------

#: Child transcripts by id (the envelope's ``transcript`` handle points here).
_TRANSCRIPTS: dict[str, dict[str, Any]] = {}
_MAX_TRANSCRIPTS = 256


def sub_agent_transcript(handle: Mapping[str, Any] | str) -> dict[str, Any] | None:
    """The full child transcript behind an envelope's ``transcript`` handle."""
    key: str = handle if isinstance(handle, str) else str(handle.get("id"))
    return _TRANSCRIPTS.get(key)


def _json_payload(text: str) -> Any:
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    body = fenced.group(1) if fenced else text
    start = min((i for i in (body.find("{"), body.find("[")) if i >= 0), default=-1)
    if start < 0:
        raise ValueError("no JSON object in the reply")
    value, _ = json.JSONDecoder().raw_decode(body[start:])
    return value


def _first_denial(result: AgentResult) -> dict[str, Any] | None:
    for event in result.trace.get("events", []):
        if event.get("type") == "tool_call_audit" and event.get("status") in (
            "permission_denied",
            "scope_violation",
        ):
            return dict(event)
    return None


def _envelope(
    req: SubAgentRequest, result: AgentResult, ledger: TokenLedger, frame: Frame
) -> dict[str, Any]:
    transcript = dict(result.transcript)
    tid = str(transcript.get("id") or f"transcript_{req.session_id}")
    transcript["parent_session_id"] = req.parent_session_id
    transcript["policy"] = frame.policy.to_dict()
    _TRANSCRIPTS[tid] = transcript
    while len(_TRANSCRIPTS) > _MAX_TRANSCRIPTS:
        _TRANSCRIPTS.pop(next(iter(_TRANSCRIPTS)))
    error = result.error or {}
    budget_exceeded = error.get("category") == "budget" or ledger.exhausted
    status = "budget_exhausted" if error.get("category") == "budget" else result.status
    env: dict[str, Any] = {
        "ok": status == "done",
        "status": status,
        "name": req.name,
        "summary": result.visible_text,
        "artifacts": [],
        "evidence_added": [{"tool": name, "status": "ok"} for name in result.tools.successful],
        "tokens_used": ledger.used,
        "token_budget": ledger.limit,
        "budget_exceeded": budget_exceeded,
        "session_id": req.session_id,
        "parent_session_id": req.parent_session_id,
        "transcript": {
            "id": tid,
            "session_id": req.session_id,
            "messages": len(transcript.get("messages", [])),
        },
        "tools": result.tools.to_dict(),
        "llm": result.llm.to_dict(),
        "policy": {
            "decisions": result.trace.get("policy_decisions", 0),
            "ms": result.trace.get("policy_ms", 0.0),
        },
    }
    if budget_exceeded and status != "done":
        env["error"] = {
            "category": "budget_exceeded",
            "message": f"token budget of {ledger.limit} spent ({ledger.used} used)",
        }
    elif status != "done":
        env["error"] = {
            "category": str(error.get("category") or status),
            "message": str(error.get("message") or result.stop_reason or status),
        }
    if status == "suspended":  # the child parked itself: how to resume it
        for key in ("handle", "reason", "initiator", "conditions", "iterations_completed"):
            if key in result.extras:
                env[key] = result.extras[key]
    denial = _first_denial(result)
    if denial is not None and "error" not in env:
        decision = denial.get("decision") or {}
        env["ok"] = False
        env["error"] = {
            "category": str(denial["status"]),
            "message": str(decision.get("reason") or denial.get("error")),
            "tool": denial["tool_name"],
        }
    if req.returns is not None and env["ok"]:
        import jsonschema

        try:
            data = _json_payload(result.visible_text or result.text)
            jsonschema.validate(data, req.returns["schema"])
        except (ValueError, jsonschema.ValidationError) as exc:
            message = exc.message if isinstance(exc, jsonschema.ValidationError) else str(exc)
            env["ok"] = False
            env["error"] = {"category": "schema_validation", "message": message}
        else:
            env["data"] = data
    return env


def _schema_instruction(returns: Mapping[str, Any]) -> str:
    return (
        "When you are done, reply with only a JSON value matching this JSON schema "
        "(no prose around it):\n" + json.dumps(returns["schema"], sort_keys=True)
    )


async def sub_agent_run_async(task: str, **options: Any) -> dict[str, Any]:
    """Run a child ``agent_loop`` and return one envelope (see the module docstring).

    Options: ``system``, ``tools``, ``allowed_tools``, ``policy``, ``token_budget``,
    ``returns`` (``{schema}``), ``session_id``, ``parent_session_id``, ``name``; every
    other option goes to the child's ``agent_loop`` (``provider``, ``model``, ...).
    ``background=True`` starts it as a worker and returns the worker handle instead
    (``wait_agent`` / ``send_input`` / ``close_agent`` take it).
    """
    background = options.pop("background", False)
    if not isinstance(background, bool):
        raise AgentOptionError("background", f"expected true or false, got {background!r}")
    req = sub_agent_request(task, **options)
    if background:
        from .workers import spawn_request

        return await spawn_request(req)
    return await run_request(req)


def reserve(req: SubAgentRequest) -> tuple[TokenLedger, TokenLedger]:
    """Reserve ``req``'s budget from the ledger of this context: ``(parent, child)``."""
    parent = _LEDGER.get() or TokenLedger()
    return parent, parent.reserve(req.token_budget, req.name)


async def run_request(
    req: SubAgentRequest,
    reserved: tuple[TokenLedger, TokenLedger] | None = None,
    messages: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """Run a normalised request (``reserved``: a budget already held; ``messages``: a
    transcript the child continues)."""
    from .loop import agent_loop_async

    parent, ledger = reserved or reserve(req)
    inner: LlmCaller = req.options.get("llm_caller") or with_retry(max_attempts=3)(
        default_llm_caller()
    )
    opts = {k: v for k, v in req.options.items() if k not in ("llm_caller",)}
    opts["llm_caller"] = budget_caller(ledger, inner)
    system = req.system
    if req.returns is not None:
        system = "\n\n".join(p for p in (system, _schema_instruction(req.returns)) if p)
    token = _LEDGER.set(ledger)
    try:
        with with_execution_policy(
            req.frame_policy(), label=f"sub_agent:{req.name}", kind="sub_agent"
        ) as frame:
            if messages:
                opts["messages"] = [dict(m) for m in messages]
            result = await agent_loop_async(
                req.task, system, tools=req.tools, session_id=req.session_id, **opts
            )
    finally:
        _LEDGER.reset(token)
        parent.settle(ledger)
    return _envelope(req, result, ledger, frame)


def sub_agent_run(task: str, **options: Any) -> dict[str, Any]:
    """Synchronous twin of :func:`sub_agent_run_async` (not inside a running event loop)."""
    return run_sync(sub_agent_run_async(task, **options))


def sub_agent_tool(tools: Sequence[Tool | Callable[..., Any]] = (), **defaults: Any) -> Tool:
    """A model-facing ``sub_agent_run`` tool: the parent model hands a task to a child
    that may use ``tools`` (narrowed by the call's ``allowed_tools``) under ``defaults``."""
    base = as_tools(list(tools))

    async def run(
        task: str, allowed_tools: list[str] | None = None, token_budget: int | None = None
    ) -> dict[str, Any]:
        opts = dict(defaults)
        opts["tools"] = base
        if allowed_tools is not None:
            opts["allowed_tools"] = allowed_tools
        if token_budget is not None:
            opts["token_budget"] = token_budget
        try:
            env = await sub_agent_run_async(task, **opts)
        except AgentOptionError as exc:
            return {"status": "error", "error": str(exc)}
        env["status"] = "ok" if env["ok"] else env["status"]
        return env

    return Tool(
        name="sub_agent_run",
        handler=run,
        description="Run a child agent on a task and get back one result envelope. Tools: "
        + ", ".join(t.name for t in base),
        parameters={
            "type": "object",
            "properties": {
                "task": {"type": "string"},
                "allowed_tools": {"type": "array", "items": {"type": "string"}},
                "token_budget": {"type": "integer"},
            },
            "required": ["task"],
        },
        annotations=ToolAnnotations(SideEffectLevel.NONE, "delegate"),
        is_async=True,
    )


__all__ = [
    "SubAgentRequest",
    "TokenLedger",
    "budget_caller",
    "child_budget",
    "child_policy",
    "current_ledger",
    "reserve",
    "run_request",
    "sub_agent_request",
    "sub_agent_run",
    "sub_agent_run_async",
    "sub_agent_tool",
    "sub_agent_transcript",
]
