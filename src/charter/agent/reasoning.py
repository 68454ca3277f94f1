"""Reasoning and thinking options: validated once, resolved by policy, lowered per provider.

Neutral keys travel in ``LlmRequest.options`` (``agent_loop`` folds its top-level keys into
``llm_options``): ``thinking``, ``reasoning_effort``, ``interleaved_thinking``,
``anthropic_beta_features``, ``reasoning_policy``, ``reasoning_scale``, ``reasoning_task``.
The built-in providers call :func:`lower_openai` / :func:`lower_anthropic`, which resolve
them into one :class:`Thinking` and then into the provider's real request parameters;
none of the neutral keys reaches an HTTP body verbatim (except ``thinking`` given in the
Anthropic wire shape, ``{"type": ...}``, which is sent as is).

Caller-supplied ``thinking`` or ``reasoning_effort`` always wins: the policy only decides
when neither is set.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .options import AgentOptionError
from .providers.base import LlmRequest, ProviderError

LEVELS = ("minimal", "low", "medium", "high", "xhigh")
EFFORTS = ("none", *LEVELS)
POLICIES = ("auto", "off", *LEVELS)
SCALES = ("auto", "small", "medium", "large")
TASKS = ("auto", "chat", "agent", "code", "verify", "summarize")
MODES = ("enabled", "disabled", "effort", "adaptive")
REASONING_KEYS = (
    "thinking",
    "reasoning_effort",
    "interleaved_thinking",
    "anthropic_beta_features",
    "reasoning_policy",
    "reasoning_scale",
    "reasoning_task",
)
ALIASES = {"thinking_policy": "reasoning_policy", "problem_scale": "reasoning_scale"}

#: Anthropic ``budget_tokens`` per level (the API's minimum is 1024).
BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32768}
INTERLEAVED_BETA = "interleaved-thinking-2025-05-14"
#: Routes whose Qwen chat templates honour the ``/think`` / ``/no_think`` soft switch.
LOCAL_ROUTES = ("ollama", "llamacpp", "local", "mlx")
#: ``reasoning_policy: "auto"``: the effort per task, before the scale shifts it.
AUTO_EFFORT = {
    "chat": "low",
    "agent": "medium",
    "code": "medium",
    "verify": "low",
    "summarize": "minimal",
}


@dataclass(frozen=True)
class Thinking:
    """One resolved thinking choice, provider-neutral.

    ``mode``: ``enabled`` | ``disabled`` | ``effort`` | ``adaptive`` | ``native`` (an
    Anthropic wire dict in ``native``). ``source``: ``caller`` or ``policy`` (a policy
    choice is fitted to what the model supports; a caller's is sent as given).
    """

    mode: str
    effort: str | None = None
    budget_tokens: int | None = None
    native: Mapping[str, Any] | None = None
    source: str = "caller"


@dataclass
class Lowered:
    """What a provider adds to its request: body parameters, headers, a prompt switch."""

    params: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    drop: set[str] = field(default_factory=set)  # option keys the params replace
    system_suffix: str | None = None
    thinking: Thinking | None = None


# -- validation ------------------------------------------------------------------------


def _check_choice(key: str, value: Any, allowed: tuple[str, ...]) -> None:
    if not isinstance(value, str) or value not in allowed:
        raise AgentOptionError(key, f"expected one of {', '.join(allowed)}, got {value!r}")


def validate(key: str, value: Any) -> None:
    """Raise :class:`AgentOptionError` naming ``key`` when ``value`` is not valid for it."""
    if key == "thinking":
        parse_thinking(value, None)
    elif key == "reasoning_effort":
        _check_choice(key, value, EFFORTS)
    elif key == "interleaved_thinking":
        if not isinstance(value, bool):
            raise AgentOptionError(key, f"expected a bool, got {value!r}")
    elif key == "anthropic_beta_features":
        _betas(value)
    elif key == "reasoning_policy":
        if not isinstance(value, bool):
            _check_choice(key, value, POLICIES)
    elif key == "reasoning_scale":
        _check_choice(key, value, SCALES)
    elif key == "reasoning_task":
        _check_choice(key, value, TASKS)


def fold_options(options: Mapping[str, Any], llm_options: Mapping[str, Any]) -> dict[str, Any]:
    """``llm_options`` plus the top-level reasoning keys (aliases resolved), validated.

    Top-level keys override ``llm_options`` (as ``temperature`` does); an alias given
    next to its canonical key with another value is an error.
    """
    out = dict(llm_options)
    for source in (llm_options, options):
        for alias, key in ALIASES.items():
            if source.get(alias) is None:
                continue
            if source.get(key) is not None and source[key] != source[alias]:
                raise AgentOptionError(alias, f"conflicts with {key}={source[key]!r}")
            out[key] = source[alias]
    for alias in ALIASES:
        out.pop(alias, None)
    for key in REASONING_KEYS:
        if options.get(key) is not None:
            out[key] = options[key]
    for key in REASONING_KEYS:
        if out.get(key) is not None:
            validate(key, out[key])
    parse_thinking(out.get("thinking"), out.get("reasoning_effort"))  # the pair agrees
    return out


def _betas(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise AgentOptionError(
            "anthropic_beta_features", f"expected a list of beta names, got {value!r}"
        )
    return list(value)


def parse_thinking(value: Any, effort: Any) -> Thinking | None:
    """The caller's ``thinking`` / ``reasoning_effort`` as one :class:`Thinking` (or None)."""
    if effort is not None:
        _check_choice("reasoning_effort", effort, EFFORTS)
    if value is None:
        if effort is None:
            return None
        return Thinking("disabled") if effort == "none" else Thinking("effort", effort=effort)
    if isinstance(value, bool):
        if not value:
            if effort not in (None, "none"):
                raise AgentOptionError(
                    "thinking", f"false conflicts with reasoning_effort={effort!r}"
                )
            return Thinking("disabled")
        return Thinking("enabled", effort=effort)
    if isinstance(value, str):
        if value in EFFORTS:
            return parse_thinking({"mode": "effort", "effort": value}, effort)
        if value in MODES:
            return parse_thinking({"mode": value}, effort)
        raise AgentOptionError(
            "thinking", f"expected a bool, one of {', '.join(MODES + EFFORTS)}, or a dict"
        )
    if not isinstance(value, Mapping):
        raise AgentOptionError("thinking", f"expected a bool, a string or a dict, got {value!r}")
    if "type" in value:  # the Anthropic wire shape: sent as given
        if not isinstance(value["type"], str):
            raise AgentOptionError("thinking.type", f"expected a string, got {value['type']!r}")
        budget = value.get("budget_tokens")
        if budget is not None:
            _budget("thinking.budget_tokens", budget)
        return Thinking("native", budget_tokens=budget, native=dict(value))
    unknown = sorted(set(value) - {"mode", "effort", "budget_tokens"})
    if unknown:
        raise AgentOptionError("thinking", f"unknown field(s) {', '.join(unknown)}")
    mode = value.get("mode", "enabled")
    _check_choice("thinking.mode", mode, MODES)
    level = value.get("effort", effort)
    if level is not None:
        _check_choice("thinking.effort", level, EFFORTS)
    budget = value.get("budget_tokens")
    if budget is not None:
        _budget("thinking.budget_tokens", budget)
    if mode == "effort" and level is None:
        level = "medium"
    if mode in ("enabled", "effort") and level == "none":
        return Thinking("disabled")
    if mode == "disabled" and level not in (None, "none"):
        raise AgentOptionError("thinking", f"mode disabled conflicts with effort {level!r}")
    return Thinking(mode, effort=level, budget_tokens=budget)


def _budget(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1024:
        raise AgentOptionError(key, f"expected an integer >= 1024, got {value!r}")
    return value


# -- model knowledge -------------------------------------------------------------------


def _name(model: str | None) -> str:
    return (model or "").lower().rsplit("/", 1)[-1]


@functools.lru_cache(maxsize=512)
def _gpt5_minor(model: str | None) -> int | None:
    """``gpt-5`` -> 0, ``gpt-5.2-codex`` -> 2, anything else -> None."""
    match = re.match(r"gpt-5(?:\.(\d+))?(?![\d.])", _name(model))
    return int(match.group(1) or 0) if match else None


@functools.lru_cache(maxsize=512)
def openai_reasoning_model(model: str | None) -> bool:
    """o-series and GPT-5 routes (not ``gpt-5-chat``), which take ``reasoning_effort``."""
    name = _name(model)
    if _gpt5_minor(model) is not None:
        return "-chat" not in name
    return bool(re.match(r"o\d(?![\d])", name)) or name.startswith("codex-mini")


@functools.lru_cache(maxsize=512)
def openai_floor(model: str | None) -> str:
    """The lowest effort a reasoning model accepts: ``none`` on GPT-5.1+, ``minimal`` on
    GPT-5, ``low`` on the o-series."""
    minor = _gpt5_minor(model)
    if minor is None:
        return "low"
    return "none" if minor >= 1 else "minimal"


def fit_openai_effort(level: str, model: str | None) -> str:
    """A policy level clamped to what ``model`` accepts (caller values are never clamped)."""
    minor = _gpt5_minor(model)
    name = _name(model)
    if level == "xhigh" and not (minor is not None and (minor >= 2 or "codex-max" in name)):
        return "high"
    if level == "minimal" and minor != 0:
        return "low"
    if level == "none" and (minor is None or minor < 1):
        return openai_floor(model)
    return level


@functools.lru_cache(maxsize=512)
def anthropic_thinking_model(model: str | None) -> bool:
    """Claude models with extended thinking (3.7 and the 4 family)."""
    return bool(re.match(r"claude-(?:3-7|(?:opus|sonnet|haiku)-4|4)", _name(model)))


@functools.lru_cache(maxsize=512)
def _opus_46_plus(model: str | None) -> bool:
    return bool(re.match(r"claude-opus-4-[6-9]", _name(model)))


@functools.lru_cache(maxsize=512)
def anthropic_adaptive_model(model: str | None) -> bool:
    """Claude models where manual ``enabled`` thinking is deprecated in favour of
    ``adaptive`` (the SDK warns for these), with depth set by ``output_config.effort``."""
    return bool(re.match(r"claude-(?:opus-4-[6-9]|mythos)", _name(model)))


def local_qwen(provider_name: str, model: str | None) -> bool:
    return provider_name in LOCAL_ROUTES and "qwen" in _name(model)


# -- policy ----------------------------------------------------------------------------


def infer_task(request: LlmRequest) -> str:
    """``reasoning_task: "auto"``: judges verify, summariser calls summarize, turns with
    tools are agent turns, the rest chat."""
    if request.purpose == "judge":
        return "verify"
    if request.purpose in ("compaction", "scratchpad"):
        return "summarize"
    # the loop's own lifecycle tool (agent_await_resumption) does not make a turn agentic
    own = {"agent_await_resumption", "wait_for_user"}
    return "agent" if any(t.get("name") not in own for t in request.tools) else "chat"


def _shift(level: str, scale: str) -> str:
    order = LEVELS[:-1]  # auto never picks xhigh
    index = order.index(level) + {"small": -1, "large": 1}.get(scale, 0)
    return order[max(0, min(index, len(order) - 1))]


def resolve(request: LlmRequest, provider_name: str, model: str | None) -> Thinking | None:
    """The thinking choice for one request: the caller's, else the policy's."""
    options = dict(request.options)
    for alias, key in ALIASES.items():  # aliases may also arrive as next-turn llm_options
        if options.get(key) is None and options.get(alias) is not None:
            options[key] = options[alias]
    caller = parse_thinking(options.get("thinking"), options.get("reasoning_effort"))
    if caller is not None:
        return caller
    policy = options.get("reasoning_policy", "auto")
    if policy is True:
        policy = "auto"
    elif policy is False:
        policy = "off"
    if policy == "off":
        return Thinking("disabled", source="policy")
    if policy in LEVELS:
        return Thinking("effort", effort=policy, source="policy")
    task = options.get("reasoning_task") or "auto"
    if task == "auto":
        task = infer_task(request)
    scale = options.get("reasoning_scale") or "auto"
    if local_qwen(provider_name, model):
        # Qwen chat templates are more reliable on compact edit loops without thinking
        return None if scale == "large" else Thinking("disabled", source="policy")
    if provider_name != "anthropic" and openai_reasoning_model(model):
        return Thinking("effort", effort=_shift(AUTO_EFFORT[task], scale), source="policy")
    return None  # Claude: thinking stays an explicit switch (seed 001)


def _checked_resolve(request: LlmRequest, provider_name: str, model: str | None) -> Thinking | None:
    try:
        for key in (*REASONING_KEYS, *ALIASES):
            if request.options.get(key) is not None:
                validate(ALIASES.get(key, key), request.options[key])
        return resolve(request, provider_name, model)
    except AgentOptionError as exc:
        raise ProviderError(
            str(exc),
            category="client",
            reason="invalid_option",
            kind="AgentOptionError",
            retryable=False,
            provider=provider_name,
        ) from exc


def strip(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` without the neutral reasoning keys (what may reach a request body)."""
    return {k: v for k, v in options.items() if k not in REASONING_KEYS and k not in ALIASES}


# -- lowering --------------------------------------------------------------------------


def _effort_for_budget(budget: int | None) -> str:
    if budget is None:
        return "medium"
    fitting = [level for level in LEVELS[:-1] if BUDGETS[level] <= budget]
    return fitting[-1] if fitting else "minimal"


def lower_openai(
    request: LlmRequest, provider_name: str, model: str | None, *, api: str = "chat"
) -> Lowered:
    """OpenAI Chat Completions (``reasoning_effort``) / Responses (``reasoning.effort``);
    on local Qwen routes, the ``/think`` / ``/no_think`` switch in the system prompt."""
    out = Lowered(thinking=_checked_resolve(request, provider_name, model))
    t = out.thinking
    reasoning_model = openai_reasoning_model(model)
    if reasoning_model and api == "chat" and "max_tokens" in request.options:
        # reasoning models reject max_tokens: the same limit is max_completion_tokens
        out.params["max_completion_tokens"] = request.options["max_tokens"]
        out.drop.add("max_tokens")
    if t is None:
        return out
    if local_qwen(provider_name, model):
        off = t.mode == "disabled" or (
            t.mode == "native" and (t.native or {}).get("type") == "disabled"
        )
        if t.mode != "adaptive":
            out.system_suffix = "/no_think" if off else "/think"
        return out
    effort: str | None
    if t.mode == "adaptive":
        effort = None  # the model's own default
    elif t.mode == "native":
        kind = (t.native or {}).get("type")
        effort = (
            None
            if kind == "adaptive"
            else (
                openai_floor(model) if kind == "disabled" else _effort_for_budget(t.budget_tokens)
            )
        )
    elif t.mode == "disabled":
        # nothing to switch off on a model that does not reason
        effort = openai_floor(model) if reasoning_model else None
    elif t.mode == "enabled":
        effort = t.effort or _effort_for_budget(t.budget_tokens)
    else:
        effort = t.effort
    if effort is not None and t.source == "policy":
        effort = fit_openai_effort(effort, model) if reasoning_model else None
    if effort is None:
        return out
    if api == "responses":
        out.params["reasoning"] = {"effort": effort}
    else:
        out.params["reasoning_effort"] = effort
    return out


def lower_anthropic(request: LlmRequest, model: str | None, *, default_max_tokens: int) -> Lowered:
    """Anthropic Messages: ``thinking={"type": "enabled", "budget_tokens": N}`` (or
    ``disabled``; ``adaptive`` with ``output_config.effort`` on Opus 4.6+, where manual
    budgets are deprecated), ``max_tokens`` above the budget, and the ``anthropic-beta``
    header (``interleaved-thinking-2025-05-14``, ``anthropic_beta_features``)."""
    options = request.options
    out = Lowered(thinking=_checked_resolve(request, "anthropic", model))
    t = out.thinking
    wire: dict[str, Any] | None = None
    if t is not None and (t.source == "caller" or anthropic_thinking_model(model)):
        if t.mode == "native":
            wire = dict(t.native or {})
        elif t.mode == "disabled":
            wire = {"type": "disabled"}
        elif t.mode == "adaptive" or (t.budget_tokens is None and anthropic_adaptive_model(model)):
            wire = {"type": "adaptive"}
            if t.effort is not None:
                # adaptive thinking's depth is the effort (the API has no "minimal")
                effort = "low" if t.effort == "minimal" else t.effort
                config = options.get("output_config")
                out.params["output_config"] = {
                    **(config if isinstance(config, Mapping) else {}),
                    "effort": effort,
                }
        else:
            budget = t.budget_tokens or BUDGETS.get(t.effort or "medium", BUDGETS["medium"])
            wire = {"type": "enabled", "budget_tokens": budget}
    if wire is not None:
        out.params["thinking"] = wire
        if wire.get("type") in ("enabled", "adaptive"):
            _anthropic_constraints(request, wire, default_max_tokens, out)
    betas = (
        _betas(options["anthropic_beta_features"])
        if options.get("anthropic_beta_features") is not None
        else []
    )
    interleaved = options.get("interleaved_thinking")
    if interleaved is None:
        # thinking: true on an Opus 4.6+ agent loop is the single switch (seed 001)
        interleaved = bool(
            t is not None
            and t.source == "caller"
            and t.mode == "enabled"
            and request.tools
            and _opus_46_plus(model)
        )
    if interleaved and INTERLEAVED_BETA not in betas:
        betas.append(INTERLEAVED_BETA)
    if betas:
        out.headers["anthropic-beta"] = ",".join(dict.fromkeys(betas))
    return out


def _anthropic_constraints(
    request: LlmRequest, wire: Mapping[str, Any], default_max: int, out: Lowered
) -> None:
    """The API's rules for thinking, checked here so the error names the option."""
    options = request.options
    if request.tools and request.tool_choice not in (None, "auto", "none"):
        raise ProviderError(
            f"anthropic: extended thinking allows tool_choice auto or none only "
            f"(got {request.tool_choice!r}); drop tool_choice or thinking",
            category="client",
            reason="invalid_option",
            kind="AgentOptionError",
            retryable=False,
            provider="anthropic",
        )
    temperature = options.get("temperature")
    if temperature is not None and temperature != 1:
        raise ProviderError(
            f"anthropic: extended thinking requires temperature 1 (got {temperature}); "
            "drop temperature or thinking",
            category="client",
            reason="invalid_option",
            kind="AgentOptionError",
            retryable=False,
            provider="anthropic",
        )
    budget = wire.get("budget_tokens")
    if not isinstance(budget, int):
        return
    if "max_tokens" in options:
        if int(options["max_tokens"]) <= budget:
            raise ProviderError(
                f"anthropic: max_tokens ({options['max_tokens']}) must exceed "
                f"thinking.budget_tokens ({budget})",
                category="client",
                reason="invalid_option",
                kind="AgentOptionError",
                retryable=False,
                provider="anthropic",
            )
    elif default_max <= budget:
        out.params["max_tokens"] = budget + default_max  # room for the answer after thinking
