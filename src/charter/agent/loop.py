"""``agent_loop`` / ``agent_turn``: the agent loop, with every tool dispatch enforced."""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
import warnings
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from charter.policy import (
    AgentScope,
    Policy,
    make_context,
    with_execution_policy,
)

from . import surface
from .callers import LlmCaller
from .completion import completion_gates
from .delegation import delegate_tool
from .directives import apply_directive
from .dispatch import Dispatcher, ToolOutcome
from .extensions import install_extensions
from .hooks import CombinedHooks
from .judges import JUDGE_SYSTEM, JudgeConfig
from .modelcall import ModelCalls
from .options import (
    AgentOptionError,
    IterationBudget,
    check_known,
    profile_defaults,
    resolve_budget,
    validate_simple,
)
from .projection import projections
from .prompts import parse_prompts
from .providers import LlmRequest, LlmResponse, Provider, ProviderError, get_provider
from .providers.base import ToolCallRequest
from .reasoning import fold_options as fold_reasoning
from .result import AgentResult, LlmStats, ToolStats, TurnResult
from .stall import stall_check
from .suspension import TOOL, await_tool
from .sync import run_sync
from .textmode import (
    DEFAULT_SENTINEL,
    has_tool_call_tags,
    parse_tool_calls,
    visible,
)
from .tools import Tool, as_tools
from .transcript import TranscriptSink
from .turns import loop_control, post_turn, record_outcomes

PROGRESS_GUIDANCE = (
    "Work step by step. Use the available tools to gather evidence and make changes; "
    "report concrete results."
)


def _default_nudge(fmt: str, sentinel: str | None, allow_sentinel: bool) -> str:
    if not allow_sentinel:
        return "Continue with concrete progress: call a tool or yield the next action."
    if fmt == "native" and not sentinel:
        return (
            "Continue with concrete tool progress. When the task is complete, reply with "
            "your final answer and no tool calls."
        )
    marker = f"<done>{sentinel}</done>" if fmt == "text" else str(sentinel)
    what = "tool progress" if fmt == "text" else "progress"
    return f"Continue with concrete {what}. Write {marker} only when the task is truly complete."


class _Config:
    """Options resolved and validated before the first provider call."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        check_known(options)
        validate_simple(options)
        o = dict(options)
        defaults = profile_defaults(o.get("profile", "tool_using"))
        self.budget: IterationBudget = resolve_budget(
            o.get("iteration_budget"), o.get("max_iterations"), defaults["max_iterations"]
        )
        self.provider_spec = o.get("provider", "mock")
        self.model: str | None = o.get("model")
        self.loop_until_done = bool(o.get("loop_until_done", False))
        self.fmt: str = o.get("tool_format", "native")
        sentinel = o.get("done_sentinel", "<mode-aware>")
        if sentinel == "<mode-aware>":
            sentinel = DEFAULT_SENTINEL if self.loop_until_done and self.fmt != "native" else None
        self.sentinel: str | None = sentinel
        self.max_nudges: int = (
            o["max_nudges"] if o.get("max_nudges") is not None else defaults["max_nudges"]
        )
        self.tool_retries: int = (
            o["tool_retries"] if o.get("tool_retries") is not None else defaults["tool_retries"]
        )
        self.llm_retries: int = (
            o["llm_retries"] if o.get("llm_retries") is not None else defaults["llm_retries"]
        )
        self.llm_backoff_ms = int(o.get("llm_backoff_ms", 2000))
        self.tool_backoff_ms = int(o.get("tool_backoff_ms", 1000))
        self.max_concurrent = int(o.get("max_concurrent_tools") or 1)
        self.fallback: str = o.get("native_tool_fallback", "allow")
        self.loop_control = o.get("loop_control")
        self.nudge: str | None = o.get("nudge")
        self.policy = o.get("policy")
        if self.policy is not None and not isinstance(self.policy, (Policy, Mapping)):
            raise AgentOptionError("policy", "expected a charter.policy.Policy or a policy dict")
        if isinstance(self.policy, Mapping):
            self.policy = Policy.from_dict(self.policy)
        self.policy_label: str = o.get("policy_label") or "agent_loop"
        scope = o.get("scope")
        if isinstance(scope, Mapping):
            scope = AgentScope(
                tools=tuple(scope.get("tools", ())),
                members=tuple(scope.get("members", ())),
                skills=tuple(scope.get("skills", ())),
                mcps=tuple(scope.get("mcps", ())),
                memory=bool(scope.get("memory", False)),
            )
        if scope is not None and not isinstance(scope, AgentScope):
            raise AgentOptionError("scope", "expected a charter.policy.AgentScope or a dict")
        self.scope: AgentScope | None = scope
        self.tool_caller = o.get("tool_caller")
        self.workspace = os.path.realpath(o.get("workspace") or os.getcwd())
        self.confine = bool(o.get("confine_to_workspace", True))
        roots = o.get("external_roots") or []
        if not isinstance(roots, (list, tuple)) or not all(isinstance(r, str) for r in roots):
            raise AgentOptionError("external_roots", "expected a list of directory paths")
        # host-absolute paths outside the workspace need an explicit root (seed 001)
        self.external_roots = [os.path.realpath(os.path.expanduser(r)) for r in roots]
        try:
            self.tools: list[Tool] = as_tools(o.get("tools"))
        except TypeError as exc:
            raise AgentOptionError("tools", str(exc)) from exc
        self.llm_caller: LlmCaller | None = o.get("llm_caller")
        # Legacy retries given next to an llm_caller are honoured (wrapped around it), not
        # dropped, and warned about: seed 001 deprecates them in favour of with_retry.
        self.wrap_retries = self.llm_caller is None or o.get("llm_retries") is not None
        if self.llm_caller is not None and (
            o.get("llm_retries") is not None or o.get("llm_backoff_ms") is not None
        ):
            warnings.warn(
                "agent_loop: llm_retries/llm_backoff_ms are deprecated; with llm_caller set, "
                "compose the retry yourself: llm_caller=with_retry(max_attempts=K + 1)(caller)",
                DeprecationWarning,
                stacklevel=3,
            )
        llm_options = dict(o.get("llm_options") or {})
        for key in ("tool_choice", "temperature", "max_tokens"):
            if o.get(key) is not None:
                llm_options[key] = o[key]
        # thinking / reasoning_effort / reasoning_policy ... ride in llm_options; the
        # providers lower them (charter.agent.reasoning)
        self.llm_options = fold_reasoning(o, llm_options)
        self.context_callback = o.get("context_callback") or o.get("context_filter")
        self.post_turn = o.get("post_turn_callback")
        self.verify_completion = o.get("verify_completion")
        self.verify_judge = JudgeConfig.parse(
            "verify_completion_judge", o.get("verify_completion_judge"), 5
        )
        self.done_judge = JudgeConfig.parse("done_judge", o.get("done_judge"), None)
        self.prompts = parse_prompts(o)  # agent.* prompt overrides
        for judge in (self.verify_judge, self.done_judge):
            if judge is not None and judge.system == JUDGE_SYSTEM:
                judge.system = self.prompts.render("agent.completion_judge_system", judge.system)
        turn_policy = o.get("turn_policy") or {}
        if not isinstance(turn_policy, Mapping) or set(turn_policy) - {
            "require_action_or_yield",
            "allow_done_sentinel",
            "max_prose_chars",
        }:
            raise AgentOptionError(
                "turn_policy",
                "expected a dict with require_action_or_yield, allow_done_sentinel, "
                "max_prose_chars",
            )
        self.turn_policy = dict(turn_policy)
        # the explicit yield of a native-mode action stage (require_action_or_yield)
        self.yield_marker: str | None = None
        action_stage = self.turn_policy.get("require_action_or_yield") and self.fmt == "native"
        if action_stage and self.turn_policy.get("allow_done_sentinel", True):
            self.yield_marker = self.sentinel or DEFAULT_SENTINEL
        stall = o.get("stall_diagnostics")
        self.stall: dict[str, Any] | None = None
        if stall:
            spec = {} if stall is True else dict(stall)
            if spec.get("enabled", True):
                self.stall = {
                    "threshold": int(spec.get("threshold", 3)),
                    "inject_feedback": bool(spec.get("inject_feedback", True)),
                    "max_feedback": int(spec.get("max_feedback", 1)),
                    "exempt": set(
                        spec.get("exempt_tools", spec.get("allow_repeated_tools", ())) or ()
                    ),
                    "include_arguments": bool(spec.get("include_arguments", False)),
                }
        self.require: list[str | list[str]] = [
            r if isinstance(r, str) else list(r) for r in o.get("require_successful_tools") or []
        ]
        self.stop_after: set[str] = set(o.get("stop_after_successful_tools") or ())
        self.transcript_dir: str | None = o.get("llm_transcript_dir")
        self.timestamp_messages = bool(o.get("timestamp_messages", False))
        self.message_decorator = o.get("message_decorator")
        self.mcp_servers = o.get("mcp_servers")
        self.session_id: str = o.get("session_id") or f"session_{uuid.uuid4().hex[:12]}"
        self.continue_session = o.get("session_id") is not None
        self.skills = o.get("skills")
        self.members = o.get("members")
        self.ask_user = o.get("ask_user")
        verify_cap = o.get("max_verify_attempts")
        if verify_cap is not None and (
            isinstance(verify_cap, bool) or not isinstance(verify_cap, int) or verify_cap < 1
        ):
            raise AgentOptionError("max_verify_attempts", "expected a positive integer")
        self.max_verify_attempts: int | None = verify_cap
        self.output_schema: Any = None  # an OutputSpec (charter.agent.typed_output)
        if o.get("output_schema") is not None:
            from .typed_output import OutputSpec

            self.output_schema = OutputSpec.parse(o["output_schema"])
        self.schema_retries: int = (
            o["schema_retries"]
            if o.get("schema_retries") is not None
            else defaults["schema_retries"]
        )
        self.prior_messages = list(o.get("messages") or [])
        self.clock: Callable[[], float] = o.get("clock") or time.time
        self.projections = projections(o.get("transcript_projection"))
        self.options = o


class _AuxProvider:
    """The loop's provider for its own helper calls (judges, compaction summaries, the
    scratchpad): they go through the run's ``llm_caller`` chain like turns do, so rate
    limits, circuit breakers, dry runs and escalation predicates see them."""

    def __init__(self, run: _Run) -> None:
        self.run = run
        self.name = getattr(run.provider, "name", "aux")

    async def complete(self, request: LlmRequest) -> LlmResponse:
        reply = await self.run.call_llm(request, self.run.iteration)
        if reply.get("ok"):
            response: LlmResponse = reply["value"]
            return response
        err = reply.get("error")
        if isinstance(err, BaseException):
            raise err
        raise ProviderError(str(reply.get("status") or "the model call failed"))


class _Run:
    """One execution of the loop (state lives here, the stack lives in the context)."""

    def __init__(self, prompt: str, system: str | None, cfg: _Config, provider: Provider) -> None:
        self.prompt = prompt
        self.system = system
        self.cfg = cfg
        self.provider = provider
        self.messages: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.stats = LlmStats()
        self.tool_stats = ToolStats(mode=cfg.fmt)
        self.texts: list[str] = []
        self.visible_texts: list[str] = []
        self.turns: list[dict[str, Any]] = []
        self.judge_decisions: list[dict[str, Any]] = []
        self.budget_decisions: list[dict[str, Any]] = []
        self.stall_warnings: list[dict[str, Any]] = []
        self.repeated_calls = 0
        self.stall_feedback = 0
        self._last_sig: str | None = None
        self._streak = 0
        self.fallbacks = 0
        self.fallback_rejections = 0
        self.nudges_total = 0
        self.active_skills: list[Any] = []
        self.extras: dict[str, Any] = {}
        self.next_llm_options: dict[str, Any] = {}
        self.next_model: str | None = None
        self._model_calls: ModelCalls | None = None
        self.next_nudge: str | None = None
        self.sink = TranscriptSink(cfg.transcript_dir) if cfg.transcript_dir else None
        self.dispatcher: Dispatcher | None = None
        self.hooks = CombinedHooks()
        self.all_tools: list[Tool] = []
        self.hidden_tools: set[str] = set()  # narrowed off the surface (not denied)
        self.last_used: dict[str, int] = {}  # tool name (lower-case) -> its last iteration
        self.gates: list[Any] = []  # executor middleware hooks add (approvals)
        self.session: Any = None  # the SessionState a continued session loaded
        self.rewrites = 0  # bumped whenever earlier prompt-visible messages are replaced
        self.deferred_user_messages: list[dict[str, Any]] = []
        self.system_tail: dict[str, str] = {}  # fragments hooks append to the system prompt
        self.session_store: Any = None
        self.session_hook: Any = None
        self.final_status = ""
        self.compaction: Any = None  # the CompactionHook, when compaction is on
        self.scratchpad_refs: Callable[[], set[str]] | None = None  # GC roots (scratchpad)
        self.transcript_extra: dict[str, Any] = {}  # fields hooks add to result.transcript
        self.started = time.perf_counter()
        self.iteration = 0
        self.limit = cfg.budget.initial
        self.aux_provider = _AuxProvider(self)
        self._visible: tuple[Any, ...] | None = None  # surface.visible_tools' cache
        self._schemas: tuple[list[Tool], list[dict[str, Any]]] | None = None
        self.verify_vetoes = 0
        self.schema_attempts = 0
        self.stream: Any = None  # the StreamHook, under agent_stream
        self.output: Any = None  # the validated output_schema object

    # -- helpers --------------------------------------------------------------------

    def event(self, kind: str, **data: Any) -> None:
        self.events.append({"type": kind, **data})
        if self.stream is not None:  # agent_stream is listening
            self.stream.loop_event(kind, data)

    def required_missing(self) -> list[str | list[str]]:
        ok = set(self.tool_stats.successful)
        missing: list[str | list[str]] = []
        for req in self.cfg.require:
            group = [req] if isinstance(req, str) else req
            if not any(name in ok for name in group):
                missing.append(req)
        return missing

    # the request's tools and system prompt (charter.agent.surface)
    effective_system = surface.effective_system
    visible_tools = surface.visible_tools
    tool_schemas = surface.tool_schemas

    def prompt_messages(self, iteration: int, system: str | None) -> tuple[list[Any], Any]:
        # No copy: the recorded list only grows, and every rewrite (compaction, a replaced
        # turn) builds a new list, so a request keeps seeing what it was sent. Copying
        # here made each iteration cost O(conversation length).
        messages: list[Any] = self.messages
        for project in self.cfg.projections:  # views over the recorded messages
            messages = project(messages, self)
        if self.cfg.context_callback is not None:
            messages = [dict(m) for m in messages]
            ctx = self._context_view(iteration, system, messages)
            out = self.cfg.context_callback(ctx)
            if isinstance(out, list):
                messages = out
            elif isinstance(out, Mapping):
                if out.get("messages") is not None:
                    messages = list(out["messages"])
                if out.get("system") is not None:
                    system = str(out["system"])
        if self.cfg.timestamp_messages or self.cfg.message_decorator is not None:
            stamp = datetime.fromtimestamp(self.cfg.clock(), UTC).isoformat(timespec="seconds")
            decorated = []
            for index, msg in enumerate(messages):
                msg = dict(msg)
                if self.cfg.timestamp_messages and isinstance(msg.get("content"), str):
                    msg["content"] = f"[{stamp}] {msg['content']}"
                if self.cfg.message_decorator is not None:
                    ctx = {
                        "session_id": self.cfg.session_id,
                        "iteration": iteration,
                        "index": index,
                        "timestamp": stamp,
                    }
                    replaced = self.cfg.message_decorator(msg, ctx)
                    if replaced is not None:
                        msg = dict(replaced)
                decorated.append(msg)
            messages = decorated
        return messages, system

    def _context_view(self, iteration: int, system: str | None, msgs: list[Any]) -> dict[str, Any]:
        def latest(role: str) -> str | None:
            for m in reversed(msgs):
                if m.get("role") == role:
                    return str(m.get("content") or "")
            return None

        return {
            "iteration": iteration,
            "system": system,
            "messages": msgs,
            "visible_messages": msgs,
            "recorded_messages": [dict(m) for m in self.messages],
            "recent_visible_messages": msgs[-6:],
            "recent_recorded_messages": self.messages[-6:],
            "latest_visible_user_message": latest("user"),
            "latest_visible_assistant_message": latest("assistant"),
            "latest_recorded_user_message": latest("user"),
            "latest_recorded_assistant_message": latest("assistant"),
            "latest_tool_result": latest("tool"),
            "latest_recorded_tool_result": latest("tool"),
        }

    def transcript_text(self) -> str:
        lines = []
        for m in self.messages[-20:]:
            content = str(m.get("content") or "")
            if m.get("tool_calls"):
                content += " " + json.dumps(m["tool_calls"], default=str)
            lines.append(f"[{m['role']}] {content[:2000]}")
        return "\n".join(lines)

    def provider_error(
        self, err: BaseException, phase: str, after_tool_result: bool
    ) -> dict[str, Any]:
        if isinstance(err, ProviderError):
            category, reason, kind, message = err.category, err.reason, err.kind, err.message
        else:
            category, reason = "internal", "unexpected_exception"
            kind, message = type(err).__name__, str(err)
        return {
            "category": category,
            "reason": reason,
            "kind": kind,
            "provider": getattr(self.provider, "name", str(self.cfg.provider_spec)),
            "model": self.cfg.model,
            "message": message,
            "phase": phase,
            "tool_format": self.cfg.fmt,
            "after_tool_result": after_tool_result,
        }

    # -- the loop -------------------------------------------------------------------

    def call_llm(self, request: LlmRequest, iteration: int) -> Awaitable[dict[str, Any]]:
        if self._model_calls is None:  # built once per run, not per turn
            self._model_calls = ModelCalls(self)
        return self._model_calls(request, iteration)  # awaited by the caller

    async def run(self, all_tools: list[Tool]) -> AgentResult:
        cfg = self.cfg
        self.messages.extend(dict(m) for m in cfg.prior_messages)
        self.messages.append({"role": "user", "content": self.prompt})
        self.dispatcher = Dispatcher(
            all_tools,
            context=make_context(cfg.workspace),
            tool_caller=cfg.tool_caller,
            tool_retries=cfg.tool_retries,
            tool_backoff_ms=cfg.tool_backoff_ms,
            max_concurrent=cfg.max_concurrent,
            gates=self.gates,
        )
        budget = cfg.budget
        limit = budget.initial
        extensions = 0
        iteration = 0
        nudges = 0
        status = ""
        error: dict[str, Any] | None = None
        stop_reason: str | None = None
        saw_tool_result = False
        vetoed_last = False

        while True:
            if iteration >= limit:
                status, stop_reason = "budget_exhausted", "max_iterations"
                break
            iteration += 1
            turn_info: dict[str, Any] = {"iteration": iteration, "started": self.cfg.clock()}
            self.turns.append(turn_info)
            await self.hooks.before_model_call(self, iteration)
            request = surface.next_request(self, iteration, all_tools)
            if self.sink:
                self.sink.request(self.cfg.session_id, iteration, request, self.provider)
            reply = await self.call_llm(request, iteration)
            self.stats.iterations += 1
            if not reply["ok"]:
                err = reply.get("error") or ProviderError(str(reply.get("status")))
                error = self.provider_error(err, "turn", saw_tool_result)
                status, stop_reason = "provider_error", "provider_error"
                self.event("provider_error", iteration=iteration, error=error)
                turn_info["ended"] = self.cfg.clock()
                break
            response: LlmResponse = reply["value"]
            if self.sink:
                self.sink.response(self.cfg.session_id, iteration, response, self.provider)
            self.stats.input_tokens += response.input_tokens
            self.stats.output_tokens += response.output_tokens
            text = response.text or ""
            shown = visible(text, cfg.sentinel)
            if text:
                self.texts.append(text)
            if shown:
                self.visible_texts.append(shown)
            turn_info["prose_chars"] = len(shown)

            # -- which tool calls did the model emit? --
            calls: list[ToolCallRequest] = []
            fallback_used = False
            if cfg.fmt == "native":
                calls = list(response.tool_calls)
                if not calls and has_tool_call_tags(text):
                    if cfg.fallback == "reject" or (
                        cfg.fallback == "allow_once" and self.fallbacks >= 1
                    ):
                        self.fallback_rejections += 1
                        if cfg.fallback == "reject":
                            error = self.provider_error(
                                ProviderError(
                                    "the model emitted text-mode <tool_call> content in a "
                                    "native-tool stage",
                                    category="tool_protocol",
                                    reason="native_tool_fallback_rejected",
                                    kind="NativeToolFallback",
                                    retryable=False,
                                ),
                                "tool_protocol",
                                saw_tool_result,
                            )
                            self.messages.append({"role": "assistant", "content": text})
                            status, stop_reason = "provider_error", "native_tool_fallback_rejected"
                            turn_info["ended"] = self.cfg.clock()
                            break
                        self.messages.append({"role": "assistant", "content": text})
                        self.messages.append(
                            {
                                "role": "user",
                                "content": "Text-mode <tool_call> tags are not accepted here: use "
                                "the native tool-calling interface.",
                            }
                        )
                        turn_info["ended"] = self.cfg.clock()
                        continue
                    calls = parse_tool_calls(text, id_prefix=f"fallback_{iteration}")
                    fallback_used = True
                    self.fallbacks += 1
            elif cfg.fmt == "text":
                calls = list(response.tool_calls) + parse_tool_calls(
                    text, id_prefix=f"text_{iteration}"
                )
            assistant: dict[str, Any] = {"role": "assistant", "content": text}
            native_ids = cfg.fmt == "native" and not fallback_used
            if calls and native_ids:
                assistant["tool_calls"] = [
                    {"id": c.id, "name": c.name, "arguments": dict(c.arguments)} for c in calls
                ]
            if response.reasoning:  # thinking blocks go back with the turn (Anthropic)
                assistant["reasoning"] = [dict(b) for b in response.reasoning]
            self.messages.append(assistant)

            outcomes: list[ToolOutcome] = []
            self.iteration, self.limit = iteration, limit
            directive = await self.hooks.before_dispatch(self, iteration, text, calls)
            if directive is not None:
                turn_info["ended"] = self.cfg.clock()
                stop = self.apply_directive(directive, assistant, calls, native_ids)
                if stop is not None:
                    status, stop_reason = str(directive.get("status") or "done"), stop
                    self.extras["stop_reason"] = stop
                    break
                continue
            if calls:
                nudges = 0
                outcomes = await self.dispatcher.dispatch(calls)
                saw_tool_result = True
                self.record_outcomes(iteration, outcomes, native_ids)
                after = self.hooks.after_dispatch(self, iteration, outcomes)
                if after is not None:  # audit sinks, streams
                    await after
                stall_check(self, iteration, calls)
            turn_info["tool_count"] = len(outcomes)

            # -- completion candidate? --
            sentinel_hit = cfg.sentinel is not None and cfg.sentinel in text
            if calls:
                proposed = sentinel_hit
            elif not cfg.loop_until_done:
                proposed = True
            else:
                proposed = sentinel_hit if cfg.sentinel else True
            if (
                not calls
                and cfg.turn_policy.get("require_action_or_yield")
                and not sentinel_hit
                and cfg.loop_until_done
            ):
                # prose alone is neither an action nor a yield; in native mode the yield is
                # the done sentinel (when allowed), not "final text with no tool calls"
                marker = cfg.yield_marker
                proposed = marker is not None and marker in text

            # -- post-turn callback --
            post_stop = replied = False
            if cfg.post_turn is not None:
                before = len(self.messages)
                post_stop, reason = post_turn(self, iteration, text, shown, calls, outcomes)
                if post_stop:
                    stop_reason = reason
                # a message in answer to a text-only turn (a simulated user) continues it
                replied = cfg.loop_until_done and not calls and len(self.messages) > before
                proposed = proposed and not replied

            max_prose = cfg.turn_policy.get("max_prose_chars")
            if max_prose and len(shown) > int(max_prose) and not proposed:
                self.messages.append(
                    {
                        "role": "user",
                        "content": f"Keep prose under {max_prose} characters; act with tools.",
                    }
                )

            turn_info["ended"] = self.cfg.clock()
            if post_stop:
                status = "done"
                break
            if cfg.stop_after and {o.name for o in outcomes if o.ok} & cfg.stop_after:
                status, stop_reason = "done", "stop_after_successful_tools"
                break

            vetoed_last = False
            completion_verdict: dict[str, Any] | None = None
            if proposed:
                gate = await completion_gates(self, iteration)
                if gate is None:
                    idle = await self.hooks.on_idle(self, iteration)  # daemons wait here
                    if idle is not None and idle.get("messages"):
                        for text_in in idle["messages"]:
                            self.messages.append({"role": "user", "content": str(text_in)})
                        nudges = 0
                        continue
                    if idle is not None:
                        status, stop_reason = str(idle["status"]), str(idle["stop_reason"])
                        self.extras["stop_reason"] = stop_reason
                        break
                    status, stop_reason = "done", "natural" if not calls else "sentinel"
                    if sentinel_hit:
                        stop_reason = "sentinel"
                    break
                completion_verdict = gate
                if gate.get("terminal"):
                    status = str(gate.get("status") or "verify_capped")
                    stop_reason = gate["stop_reason"]
                    self.extras["stop_reason"] = stop_reason
                    break
                vetoed_last = True
                self.messages.append({"role": "user", "content": gate["feedback"]})
            elif not calls and not replied:
                nudges += 1
                self.nudges_total += 1
                if nudges > cfg.max_nudges:
                    status, stop_reason = "stuck", "max_nudges"
                    break
                allow_sentinel = bool(cfg.turn_policy.get("allow_done_sentinel", True))
                message = (
                    self.next_nudge
                    or cfg.nudge
                    or cfg.prompts.render(
                        "agent.nudge",
                        _default_nudge(cfg.fmt, cfg.sentinel or cfg.yield_marker, allow_sentinel),
                        fmt=cfg.fmt,
                        sentinel=cfg.sentinel or cfg.yield_marker,
                    )
                )
                self.messages.append({"role": "user", "content": message})
            self.next_nudge = None

            # -- iteration budget / loop_control --
            command = loop_control(
                self,
                iteration,
                limit,
                extensions,
                outcomes,
                shown,
                proposed,
                vetoed_last,
                completion_verdict,
                fallback_used,
            )
            if command is not None:
                action = command.get("action", "none")
                if action == "extend":
                    old = limit
                    if "until" in command:
                        target = int(command["until"])
                    else:
                        target = limit + int(command.get("by") or budget.extend_by or 1)
                    limit = max(limit, min(target, budget.max))
                    if limit > old:
                        extensions += 1
                    self.budget_decisions.append(
                        {
                            "iteration": iteration,
                            "action": "extend",
                            "old_limit": old,
                            "new_limit": limit,
                            "reason": command.get("reason"),
                        }
                    )
                    self.event(
                        "loop_control_decision",
                        action="extend",
                        oldLimit=old,
                        newLimit=limit,
                        reason=command.get("reason"),
                    )
                elif action == "stop":
                    self.budget_decisions.append(
                        {
                            "iteration": iteration,
                            "action": "stop",
                            "old_limit": limit,
                            "new_limit": limit,
                            "reason": command.get("reason"),
                        }
                    )
                    status = str(command.get("status") or "incomplete")
                    stop_reason = str(command.get("reason") or "loop_control_stop")
                    break

        if status == "done" and self.required_missing():
            status = "failed"
            stop_reason = "require_successful_tools"
        if status in ("failed", "incomplete") or stop_reason == "post_turn_stop":
            self.extras.setdefault("stop_reason", stop_reason)
        if budget.expose_decisions:
            self.extras["adaptive_budget"] = {
                "mode": budget.mode,
                "initial": budget.initial,
                "max": budget.max,
                "final_limit": limit,
                "extensions_used": extensions,
                "decisions": self.budget_decisions,
            }
        if (
            cfg.post_turn is not None
            and stop_reason
            and stop_reason
            not in (
                "natural",
                "sentinel",
                "max_iterations",
                "max_nudges",
                "provider_error",
            )
        ):
            self.extras.setdefault("stop_reason", stop_reason)
        return self.finish(status, error, stop_reason)

    def apply_directive(
        self,
        directive: Mapping[str, Any],
        assistant: dict[str, Any],
        calls: list[ToolCallRequest],
        native: bool,
    ) -> str | None:
        """Carry out a ``before_dispatch`` objection (:mod:`charter.agent.directives`)."""
        return apply_directive(self, directive, assistant, calls, native)

    def iterations_left(self) -> int:
        """Iterations the current budget allows after the current one."""
        return self.limit - self.iteration

    record_outcomes = record_outcomes  # stats, audit events, tool messages (turns.py)

    def finish(
        self, status: str, error: dict[str, Any] | None, stop_reason: str | None
    ) -> AgentResult:
        cfg = self.cfg
        self.final_status = status
        self.hooks.on_finish(self)
        self.stats.duration_ms = int((time.perf_counter() - self.started) * 1000)
        if self.sink:
            self.sink.close()
        if cfg.stall is not None:
            self.extras["repeated_tool_calls"] = self.repeated_calls
            self.extras["stall_warnings"] = self.stall_warnings
            self.extras["suspected_loop"] = bool(self.stall_warnings)
        if cfg.verify_judge is not None:
            self.extras["completion_judge"] = cfg.verify_judge.summary()
        if cfg.done_judge is not None:
            self.extras["done_judge"] = cfg.done_judge.summary()
        dispatcher = self.dispatcher
        missing = self.required_missing()
        trace = {
            "session_id": cfg.session_id,
            "stop_reason": stop_reason,
            "events": self.events,
            "native_text_tool_fallbacks": self.fallbacks,
            "native_text_tool_fallback_rejections": self.fallback_rejections,
            "empty_completion_retries": 0,
            "policy_decisions": dispatcher.decisions if dispatcher else 0,
            "policy_ms": round((dispatcher.policy_ns if dispatcher else 0) / 1e6, 3),
        }
        return AgentResult(
            status=status,
            error=error,
            text="\n".join(self.texts),
            visible_text="\n".join(self.visible_texts),
            llm=self.stats,
            tools=self.tool_stats,
            deferred_user_messages=list(self.deferred_user_messages),
            task_ledger={
                "deliverables": [],
                "nudges": self.nudges_total,
                "required_tools": list(cfg.require),
                "required_tools_missing": missing,
            },
            trace=trace,
            transcript={
                "id": f"transcript_{cfg.session_id}",
                "session_id": cfg.session_id,
                "system": self.system,
                "messages": self.messages,
                "events": [e for e in self.events if e["type"] != "tool_call_audit"],
                **self.transcript_extra,
            },
            extras=self.extras,
            output=self.output,
        )


async def _execute(
    prompt: str, system: str | None, options: Mapping[str, Any]
) -> tuple[AgentResult, _Run]:
    try:
        return await _execute_in_stack(prompt, system, options)
    except BaseExceptionGroup as group:  # raised through MCP transports' task groups
        from .mcp import single_error

        error = single_error(group)
        if error is group:
            raise
        raise error from group


async def _execute_in_stack(
    prompt: str, system: str | None, options: Mapping[str, Any]
) -> tuple[AgentResult, _Run]:
    cfg = _Config(options)
    provider = get_provider(cfg.provider_spec)
    async with contextlib.AsyncExitStack() as stack:
        if cfg.confine:
            stack.enter_context(
                with_execution_policy(
                    {"paths": [cfg.workspace, *cfg.external_roots], "name": "workspace"},
                    label="workspace",
                    kind="workspace",
                )
            )
        if cfg.policy is not None:
            stack.enter_context(
                with_execution_policy(cfg.policy, label=cfg.policy_label, kind="ambient")
            )
        if cfg.scope is not None:
            stack.enter_context(
                with_execution_policy(cfg.scope.policy("scope"), label="scope", kind="scope")
            )
        tools = list(cfg.tools)
        if cfg.ask_user is not None:
            if any(t.name == "ask_user" for t in tools):
                raise AgentOptionError(
                    "ask_user",
                    "tools already has an ask_user tool: give the answerer to one of them",
                )
            from .builtins import builtin_tools

            tools.extend(builtin_tools(cfg.workspace, ask_user=cfg.ask_user, names=("ask_user",)))
        if not any(t.name == TOOL for t in tools):
            tools.append(await_tool())  # every loop may park itself (seed 001)
        run = _Run(prompt, system, cfg, provider)
        if cfg.members:
            tools.append(delegate_tool(cfg.members))
        if cfg.mcp_servers:
            from .mcp import connect_servers

            tools.extend(await connect_servers(cfg.mcp_servers, stack))
        await install_extensions(run, tools, stack)
        return await run.run(tools), run


async def agent_loop_async(prompt: str, system: str | None = None, **options: Any) -> AgentResult:
    """Run an agent until it is done (see ``docs/agent.md`` for every option).

    The ``policy`` option is pushed as an ambient frame (and ``scope`` as a scope frame)
    for the loop's duration; every tool call is decided against the whole stack by
    :func:`charter.policy.decide_current` before its handler can run.
    """
    result, _ = await _execute(prompt, system, options)
    return result


def agent_loop(prompt: str, system: str | None = None, **options: Any) -> AgentResult:
    """Synchronous twin of :func:`agent_loop_async` (must not be called inside a running loop)."""
    return run_sync(agent_loop_async(prompt, system, **options))


async def agent_turn_async(prompt: str, **options: Any) -> TurnResult:
    """One agent completes one request: loop-until-done with a completion judge.

    ``system`` joins generic progress guidance; ``judge`` / ``done_judge`` customise the
    judge (default: the provider's structured judge).
    """
    opts = dict(options)
    system = opts.pop("system", None)
    judge = opts.pop("judge", None)
    if judge is not None:
        opts["done_judge"] = judge
    opts.setdefault("done_judge", True)
    opts.setdefault("loop_until_done", True)
    full_system = "\n\n".join(p for p in (system, PROGRESS_GUIDANCE) if p)
    base, run = await _execute(prompt, full_system, opts)
    decisions = []
    for d in run.judge_decisions:
        entry = {k: d.get(k) for k in ("iteration", "verdict", "reasoning", "next_step")}
        entry["judge_duration_ms"] = d.get("judge_duration_ms", 0)
        if d.get("trigger"):
            entry["trigger"] = d["trigger"]
        decisions.append(entry)
    return TurnResult(
        status=base.status,
        error=base.error,
        text=base.text,
        visible_text=base.visible_text,
        llm=base.llm,
        tools=base.tools,
        deferred_user_messages=base.deferred_user_messages,
        task_ledger=base.task_ledger,
        trace=base.trace,
        transcript=base.transcript,
        extras=base.extras,
        output=base.output,
        iterations=[dict(t) for t in run.turns],
        judge_decisions=decisions,
    )


def agent_turn(prompt: str, **options: Any) -> TurnResult:
    """Synchronous twin of :func:`agent_turn_async`."""
    return run_sync(agent_turn_async(prompt, **options))
