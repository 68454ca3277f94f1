"""Role presets (seed 001 "Generic role presets" and "Captain presets").

A preset is an ordinary ``agent_loop`` options dict; caller options always win, and
``iteration_budget="adaptive"`` keeps the preset's numbers while switching the mode.
The ``*_agent`` helpers run ``agent_loop_async`` with it.

Captain layers that need callers of the part-2 issue (``consent`` callables, ``dry_run``,
``cheap_caller`` / ``frontier_caller``, ``audit_sink``) are not here yet: passing them
fails as an unknown option rather than being ignored. Two captain defaults are enforced
now: ``merge_captain`` denies writes by default through a ``read_only`` policy frame (the
seed's consent layer also auto-approves ``fetch``; this is stricter), and
``oncall_captain`` caps tool calls at 50 per run (``rate_limit: {max_calls, message}``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from charter.policy import ToolCall

from .options import AgentOptionError
from .result import AgentResult

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
    "merge_captain": {
        **_captain(8, 60, 4),
        "policy": {"name": "merge_captain_consent", "side_effect_level": "read_only"},
        "policy_label": "merge_captain_consent",
    },
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


def _rate_limit(spec: Any) -> Any:
    if not isinstance(spec, Mapping) or set(spec) - {"max_calls", "message"}:
        raise AgentOptionError("rate_limit", "expected {max_calls, message?}")
    limit = spec.get("max_calls")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise AgentOptionError("rate_limit.max_calls", "expected a positive integer")
    message = str(spec.get("message") or f"tool call limit of {limit} reached")

    def middleware(executor: Any) -> Any:
        count = 0

        async def limited(call: ToolCall) -> Any:
            nonlocal count
            count += 1
            if count > limit:
                return {"status": "rate_limited", "error": message, "limit": limit}
            out = executor(call)
            return await out if asyncio.iscoroutine(out) else out

        return limited

    return middleware


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
    limit = out.pop("rate_limit", None)
    if limit is not None:
        if out.get("tool_caller") is not None:
            if "rate_limit" in caller:
                raise AgentOptionError("rate_limit", "given together with tool_caller")
        else:
            out["tool_caller"] = _rate_limit(limit)
    return out


async def run_preset(kind: str, task: str, options: Mapping[str, Any] | None = None) -> AgentResult:
    from .loop import agent_loop_async

    opts = agent_preset(kind, options)
    system = opts.pop("system", None)
    return await agent_loop_async(task, system, **opts)


def _helper(kind: str) -> Any:
    def run(task: str, options: Mapping[str, Any] | None = None, **kw: Any) -> AgentResult:
        return asyncio.run(run_preset(kind, task, {**(options or {}), **kw}))

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
