"""Option validation for ``agent_loop``: unknown keys and bad budgets fail up front."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from charter.errors import CharterError

#: Profile defaults (seed 001). Explicit option keys override these.
PROFILES: dict[str, dict[str, int]] = {
    "tool_using": {
        "max_iterations": 50,
        "max_nudges": 8,
        "tool_retries": 0,
        "llm_retries": 2,
        "schema_retries": 0,
    },
    "researcher": {
        "max_iterations": 30,
        "max_nudges": 4,
        "tool_retries": 0,
        "llm_retries": 2,
        "schema_retries": 0,
    },
    "verifier": {
        "max_iterations": 5,
        "max_nudges": 0,
        "tool_retries": 0,
        "llm_retries": 2,
        "schema_retries": 3,
    },
    "completer": {
        "max_iterations": 1,
        "max_nudges": 0,
        "tool_retries": 0,
        "llm_retries": 2,
        "schema_retries": 0,
    },
}

#: Every option ``agent_loop`` understands, with its default (``None`` = unset).
KNOWN_OPTIONS: dict[str, Any] = {
    "provider": "mock",
    "model": None,
    "profile": "tool_using",
    "loop_until_done": False,
    "done_sentinel": "<mode-aware>",
    "max_iterations": None,
    "iteration_budget": None,
    "loop_control": None,
    "max_nudges": None,
    "nudge": None,
    "tool_format": "native",
    "native_tool_fallback": "allow",
    "tools": None,
    "tool_retries": None,
    "tool_backoff_ms": 1000,
    "max_concurrent_tools": 1,
    "policy": None,
    "policy_label": None,
    "scope": None,
    "tool_caller": None,
    "workspace": None,
    "confine_to_workspace": True,
    "llm_caller": None,
    "llm_retries": None,
    "llm_backoff_ms": 2000,
    "schema_retries": None,
    "llm_options": None,
    "tool_choice": None,
    "temperature": None,
    "max_tokens": None,
    # reasoning / thinking (charter.agent.reasoning): folded into llm_options, lowered by
    # each provider into its own parameters
    "thinking": None,
    "reasoning_effort": None,
    "interleaved_thinking": None,
    "anthropic_beta_features": None,
    "reasoning_policy": "auto",
    "thinking_policy": None,
    "reasoning_scale": "medium",
    "problem_scale": None,
    "reasoning_task": None,
    "context_callback": None,
    "context_filter": None,
    "post_turn_callback": None,
    "verify_completion": None,
    "verify_completion_judge": None,
    "done_judge": None,
    "turn_policy": None,
    "stall_diagnostics": None,
    "require_successful_tools": None,
    "stop_after_successful_tools": None,
    "llm_transcript_dir": None,
    "timestamp_messages": False,
    "message_decorator": None,
    "mcp_servers": None,
    "session_id": None,
    "skills": None,
    "skill_match": None,
    "working_files": None,
    "tool_surface_narrowing": None,
    "progress_tool": None,
    "members": None,
    "ask_user": None,
    "messages": None,
    "clock": None,
    "approval_policy": None,
    "permissions": None,
    "on_escalation": None,
    "approval_store": None,
    "external_roots": None,
    "session_store": None,
    "scratchpad": None,
    "compaction": None,
    "compact_threshold": None,
    "compact_keep_first": None,
    "compact_keep_last": None,
    "compact_strategy": None,
    "compact_callback": None,
    "compaction_policy": None,
    "auto_compact": None,
    "transcript_projection": None,
    "step_judge": None,
    "max_verify_attempts": None,
    "output_schema": None,
    "daemon": False,
    "persist_path": None,
    "resume_path": None,
    "wake_interval_ms": None,
    "watch_paths": None,
    "consolidate_on_idle": False,
    "idle_watchdog_attempts": None,
    "system_reminders": None,
    # features as values (charter.agent.hooks.LoopHook instances), after the built-in ones
    "hooks": None,
    # parent-side worker control (seed 001): the lifecycle tools with subagent_pause /
    # subagent_resume / subagent_stop
    "subagents": False,
    "subagent_tools": False,
    # audit sinks flush in the background while the next turn starts (drained at the end)
    "prefetch_next_turn": False,
    # the loop's own prompts by logical id (charter.agent.prompts)
    "prompts": None,
    "prompt_overrides": None,
}

TOOL_FORMATS = ("native", "text", "none")
FALLBACK_MODES = ("allow", "allow_once", "reject")


class AgentOptionError(CharterError, ValueError):
    """An invalid ``agent_loop`` option, raised before the first provider call."""

    def __init__(self, option: str, message: str) -> None:
        self.option = option
        super().__init__(f"agent_loop option '{option}': {message}")


def check_known(options: Mapping[str, Any], extra: tuple[str, ...] = ()) -> None:
    """Raise :class:`AgentOptionError` for the first unknown option, with suggestions."""
    known = set(KNOWN_OPTIONS) | set(extra)
    for key in options:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise AgentOptionError(key, f"unknown option{hint}")


def _positive_int(option: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise AgentOptionError(option, f"expected a positive integer, got {value!r}")
    return value


def _non_negative_int(option: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AgentOptionError(option, f"expected a non-negative integer, got {value!r}")
    return value


@dataclass(frozen=True)
class IterationBudget:
    """A resolved iteration budget: the loop starts at ``initial`` and never passes ``max``."""

    mode: str
    initial: int
    max: int
    extend_by: int
    expose_decisions: bool


def resolve_budget(iteration_budget: Any, max_iterations: Any, profile_max: int) -> IterationBudget:
    """Resolve ``iteration_budget`` / ``max_iterations`` into one budget, validating both."""
    explicit_max = (
        None if max_iterations is None else _positive_int("max_iterations", max_iterations)
    )
    if iteration_budget is None:
        n = explicit_max if explicit_max is not None else profile_max
        return IterationBudget("fixed", n, n, 0, False)
    spec: dict[str, Any]
    if isinstance(iteration_budget, str):
        spec = {"mode": iteration_budget}
    elif isinstance(iteration_budget, Mapping):
        spec = dict(iteration_budget)
    else:
        raise AgentOptionError(
            "iteration_budget", f"expected 'fixed', 'adaptive' or a dict, got {iteration_budget!r}"
        )
    unknown = set(spec) - {"mode", "initial", "max", "extend_by", "expose_decisions"}
    if unknown:
        raise AgentOptionError("iteration_budget", f"unknown field(s) {', '.join(sorted(unknown))}")
    mode = spec.get("mode", "fixed")
    if mode not in ("fixed", "adaptive"):
        raise AgentOptionError("iteration_budget", f"mode must be fixed or adaptive, got {mode!r}")
    adaptive = mode == "adaptive"
    if "max" in spec:
        top = _positive_int("iteration_budget.max", spec["max"])
    elif adaptive:
        top = 16
    else:
        top = explicit_max if explicit_max is not None else 50
    if "initial" in spec:
        initial = _positive_int("iteration_budget.initial", spec["initial"])
    else:
        initial = max(1, top // 4) if adaptive else top
    if "extend_by" in spec:
        extend_by = (
            _positive_int("iteration_budget.extend_by", spec["extend_by"])
            if adaptive
            else _non_negative_int("iteration_budget.extend_by", spec["extend_by"])
        )
    else:
        extend_by = 2 if adaptive else 0
    if initial > top:
        raise AgentOptionError(
            "iteration_budget", f"initial ({initial}) must be less than or equal to max ({top})"
        )
    expose = spec.get("expose_decisions", adaptive)
    return IterationBudget(str(mode), initial, top, extend_by, bool(expose))


def profile_defaults(profile: Any) -> dict[str, int]:
    if not isinstance(profile, str) or profile not in PROFILES:
        raise AgentOptionError("profile", f"expected one of {', '.join(PROFILES)}, got {profile!r}")
    return PROFILES[profile]


def validate_simple(options: Mapping[str, Any]) -> None:
    """Type checks for the scalar options (the loop validates the structured ones)."""
    fmt = options.get("tool_format", "native")
    if fmt not in TOOL_FORMATS:
        raise AgentOptionError("tool_format", f"expected one of {', '.join(TOOL_FORMATS)}")
    fallback = options.get("native_tool_fallback", "allow")
    if fallback not in FALLBACK_MODES:
        raise AgentOptionError(
            "native_tool_fallback", f"expected one of {', '.join(FALLBACK_MODES)}"
        )
    for key in ("max_nudges", "tool_retries", "llm_retries", "schema_retries", "tool_backoff_ms"):
        if options.get(key) is not None:
            _non_negative_int(key, options[key])
    if options.get("max_concurrent_tools") is not None:
        _positive_int("max_concurrent_tools", options["max_concurrent_tools"])
    sentinel = options.get("done_sentinel", "<mode-aware>")
    if sentinel is not None and (not isinstance(sentinel, str) or not sentinel):
        raise AgentOptionError("done_sentinel", "expected a non-empty string or None")
    for key in (
        "loop_control",
        "llm_caller",
        "context_callback",
        "context_filter",
        "post_turn_callback",
        "verify_completion",
        "message_decorator",
        "tool_caller",
        "ask_user",
    ):
        value = options.get(key)
        if value is not None and not callable(value):
            raise AgentOptionError(key, "expected a callable")
    req = options.get("require_successful_tools")
    if req is not None:
        if not isinstance(req, (list, tuple)):
            raise AgentOptionError("require_successful_tools", "expected a list")
        for item in req:
            ok = isinstance(item, str) or (
                isinstance(item, (list, tuple)) and item and all(isinstance(i, str) for i in item)
            )
            if not ok:
                raise AgentOptionError(
                    "require_successful_tools",
                    f"expected tool names or non-empty lists of names (OR groups), got {item!r}",
                )
    stop = options.get("stop_after_successful_tools")
    if stop is not None and (
        not isinstance(stop, (list, tuple)) or not all(isinstance(i, str) for i in stop)
    ):
        raise AgentOptionError("stop_after_successful_tools", "expected a list of tool names")
