"""Role presets (seed 001 "Generic role presets" and "Captain presets").

A preset is an ordinary ``agent_loop`` options dict; caller options always win, and
``iteration_budget="adaptive"`` keeps the preset's numbers while switching the mode.
The ``*_agent`` helpers run ``agent_loop_async`` with it.

Captain layers (opt-in; each needs its dependency, and an explicit ``tool_caller`` /
``llm_caller`` from the caller opts out of the layers on that side):

- ``consent`` (a callable ``request -> bool | {grant}``): the approval gate's
  ``on_escalation``. ``merge_captain``'s default consent layer is an ``approval_policy``
  that auto-approves tools of kind read/search/fetch/think and read-only tools and asks
  for everything else: without a ``consent`` callable those calls are refused;
- ``audit_sink`` (a callable): every tool call's record ``{tool, arguments, status,
  result, decision, call_id, iteration}`` after its turn, denied calls included;
- ``rate_limit`` (``{max_calls, per_seconds?, message?}``): ``with_rate_limit`` on model
  calls; ``oncall_captain`` defaults to 50;
- ``dry_run`` (``True`` or ``with_dry_run`` options): model calls are recorded, not sent;
- ``cheap_caller`` + ``frontier_caller`` (+ ``escalate_predicate``): ``with_escalation``;
- ``logging_sink`` (a callable): one record per model call.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from .audit import AuditSinkHook
from .callers import (
    call_caller,
    compose,
    default_llm_caller,
    with_dry_run,
    with_escalation,
    with_rate_limit,
)
from .options import AgentOptionError
from .result import AgentResult
from .sync import run_sync

_STALL = {"enabled": True, "threshold": 3}


def _adaptive(initial: int, top: int, extend_by: int) -> dict[str, Any]:
    return {"mode": "adaptive", "initial": initial, "max": top, "extend_by": extend_by}


def _captain(initial: int, top: int, extend_by: int) -> dict[str, Any]:
    return {
        "profile": "tool_using",
        "tool_format": "native",
        "loop_until_done": True,
        "max_nudges": 3,
        "iteration_budget": _adaptive(initial, top, extend_by),
        "stall_diagnostics": dict(_STALL),
        "done_sentinel": None,
    }


#: merge_captain's default consent: reads pass, everything else needs ``consent``.
MERGE_CONSENT: dict[str, Any] = {
    "rules": [
        {
            "name": "merge_captain_consent:reads",
            "decision": "allow",
            "match": {"kind": ["read", "search", "fetch", "think"]},
        },
        {
            "name": "merge_captain_consent:read_only",
            "decision": "allow",
            "match": {"max_side_effect_level": "read_only"},
        },
    ],
    "default": "ask",
}
LAYER_KEYS = (
    "consent",
    "audit_sink",
    "rate_limit",
    "dry_run",
    "cheap_caller",
    "frontier_caller",
    "escalate_predicate",
    "logging_sink",
)

PRESETS: dict[str, dict[str, Any]] = {
    "audit": {
        "profile": "verifier",
        "tool_format": "native",
        "loop_until_done": True,
        "max_nudges": 1,
        "iteration_budget": _adaptive(4, 12, 2),
        "stall_diagnostics": dict(_STALL),
        "done_sentinel": None,
    },
    "repair": {
        "profile": "tool_using",
        "tool_format": "native",
        "loop_until_done": True,
        "max_nudges": 2,
        "iteration_budget": _adaptive(4, 16, 2),
        "stall_diagnostics": dict(_STALL),
        "done_sentinel": None,
    },
    "summary": {
        "profile": "completer",
        "loop_until_done": False,
        "max_nudges": 0,
        "iteration_budget": {"mode": "fixed", "initial": 1, "max": 1},
        "tool_choice": "none",
        "done_sentinel": None,
    },
    "verify": {
        "profile": "verifier",
        "loop_until_done": False,
        "max_nudges": 0,
        "iteration_budget": _adaptive(1, 5, 1),
        "done_judge": True,
    },
    "merge_captain": {**_captain(8, 60, 4), "approval_policy": MERGE_CONSENT},
    "review_captain": _captain(6, 30, 3),
    "oncall_captain": {**_captain(6, 24, 3), "rate_limit": {"max_calls": 50}},
    "release_captain": _captain(8, 40, 4),
}


def agent_budget(
    kind: str | Mapping[str, Any], overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """An ``iteration_budget`` dict: a preset's (``"repair"``), ``"adaptive"`` /
    ``"fixed"``, or a dict, with ``overrides`` applied."""
    if isinstance(kind, Mapping):
        base = dict(kind)
    elif kind in PRESETS:
        base = dict(PRESETS[kind]["iteration_budget"])
    elif kind == "adaptive":
        base = _adaptive(4, 16, 2)
    elif kind == "fixed":
        base = {"mode": "fixed", "initial": 50, "max": 50}
    else:
        raise AgentOptionError(
            "agent_budget", f"expected a preset, 'adaptive', 'fixed' or a dict, got {kind!r}"
        )
    base.update(overrides or {})
    return base


def _callable(key: str, value: Any) -> Any:
    if not callable(value):
        raise AgentOptionError(key, "expected a callable")
    return value


def _logging_layer(sink: Any) -> Any:
    sink = _callable("logging_sink", sink)

    def middleware(inner: Any) -> Any:
        async def logged(call: dict[str, Any]) -> dict[str, Any]:
            started = time.perf_counter()
            reply = await call_caller(inner, call)
            request = call.get("request")
            sink(
                {
                    "iteration": (call.get("turn") or {}).get("iteration"),
                    "model": getattr(request, "model", None),
                    "purpose": getattr(request, "purpose", None),
                    "ok": bool(reply.get("ok")),
                    "tier": reply.get("tier"),
                    "duration_ms": round((time.perf_counter() - started) * 1000, 3),
                }
            )
            return reply

        return logged

    return middleware


def _layers(out: dict[str, Any], layers: dict[str, Any]) -> None:
    """Turn the captain layer keys into approval options, a tool caller and an llm caller."""
    if "consent" in layers:
        consent = _callable("consent", layers["consent"])
        out.setdefault("approval_policy", {"rules": [], "default": "ask"})
        out["on_escalation"] = lambda request: consent(request)
    if "audit_sink" in layers and out.get("tool_caller") is None:
        # a loop hook, not tool-caller middleware: denied and refused calls are recorded too
        sink = AuditSinkHook(_callable("audit_sink", layers["audit_sink"]))
        out["hooks"] = [*(out.get("hooks") or ()), sink]
    if out.get("llm_caller") is not None:
        return  # an explicit llm_caller opts out of the model-call layers
    middlewares: list[Any] = []
    if "logging_sink" in layers:
        middlewares.append(_logging_layer(layers["logging_sink"]))
    if layers.get("rate_limit") is not None:
        spec = layers["rate_limit"]
        if not isinstance(spec, Mapping):
            raise AgentOptionError("rate_limit", "expected {max_calls, per_seconds?, message?}")
        middlewares.append(with_rate_limit(dict(spec)))
    if layers.get("dry_run"):
        spec = layers["dry_run"]
        middlewares.append(with_dry_run(None if spec is True else dict(spec)))
    base: Any = None
    if "cheap_caller" in layers or "frontier_caller" in layers:
        if "cheap_caller" not in layers or "frontier_caller" not in layers:
            raise AgentOptionError("cheap_caller", "needs both cheap_caller and frontier_caller")
        base = with_escalation(
            layers["cheap_caller"], layers["frontier_caller"], layers.get("escalate_predicate")
        )
    elif "escalate_predicate" in layers:
        raise AgentOptionError("escalate_predicate", "needs cheap_caller and frontier_caller")
    if base is None and not middlewares:
        return
    out["llm_caller"] = compose(middlewares)(base or default_llm_caller())


def agent_preset(kind: str, options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The options dict of preset ``kind`` with ``options`` on top (caller wins)."""
    if kind not in PRESETS:
        raise AgentOptionError("preset", f"expected one of {', '.join(PRESETS)}, got {kind!r}")
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in PRESETS[kind].items()}
    caller = dict(options or {})
    if caller.get("iteration_budget") == "adaptive":
        caller["iteration_budget"] = {**out.get("iteration_budget", {}), "mode": "adaptive"}
        caller["iteration_budget"].setdefault("extend_by", 2)
    if "policy" in caller:
        out.pop("policy_label", None)
    out.update(caller)
    layers = {k: out.pop(k) for k in LAYER_KEYS if k in out}
    _layers(out, layers)
    return out


async def run_preset(kind: str, task: str, options: Mapping[str, Any] | None = None) -> AgentResult:
    from .loop import agent_loop_async

    opts = agent_preset(kind, options)
    system = opts.pop("system", None)
    return await agent_loop_async(task, system, **opts)


def _helper(kind: str) -> Any:
    def run(task: str, options: Mapping[str, Any] | None = None, **kw: Any) -> AgentResult:
        return run_sync(run_preset(kind, task, {**(options or {}), **kw}))

    run.__name__ = f"{kind}_agent"
    run.__doc__ = f"Run ``agent_loop`` with the ``{kind}`` preset (caller options win)."
    return run


audit_agent = _helper("audit")
repair_agent = _helper("repair")
summary_agent = _helper("summary")
verify_agent = _helper("verify")
merge_captain_agent = _helper("merge_captain")
review_captain_agent = _helper("review_captain")
oncall_captain_agent = _helper("oncall_captain")
release_captain_agent = _helper("release_captain")
