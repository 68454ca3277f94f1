"""Agent-loop compaction: keep the prompt under the context budget (seed 001).

Before a model call whose prompt would exceed ``compact_threshold`` tokens (counted by
:mod:`charter.agent.tokens`: tiktoken for OpenAI models, the measured estimate otherwise;
default: 80% of the model's known context window, none when it is unknown), the older
prompt-visible messages are replaced by one summary message. The system prompt is kept
separately; ``compact_keep_first`` messages stay verbatim before the summary and
``compact_keep_last`` (``keep_last_n``) after it. A tool result is never separated from
the assistant message that called it.

Strategies: ``none`` / ``False``; ``truncate`` (a deterministic abbreviated summary);
``drop_tool_outputs`` (old tool-result bodies become one-line stubs, nothing else
changes); ``summarize_middle`` (a summariser model call over the older messages);
``summarize_all`` (the same over every compactable message); ``hybrid`` (the default:
summarize_middle, falling back to truncate when the summary fails or still exceeds the
limit); ``custom`` (``compact_callback(archived, reminders, policy)`` returns the summary).

A :class:`CompactionPolicy` carries host/user instructions and what to ``preserve``:
``test_failures``, ``errors``, ``current_plan`` and ``files_touched`` are found
deterministically in the archived messages and kept (verbatim, or listed for files) so a
summary can never lose them. Every compaction emits ``TranscriptCompacted``.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from .hooks import LoopHook
from .options import AgentOptionError
from .providers import LlmRequest, get_provider
from .tokens import MessageCounter, context_window, counter_for

STRATEGIES = (
    "none",
    "truncate",
    "drop_tool_outputs",
    "summarize_middle",
    "summarize_all",
    "hybrid",
    "custom",
)
PRESERVE_KINDS = ("test_failures", "errors", "current_plan", "files_touched")
SCOPES = ("host", "model_visible", "summary", "transcript")
DEFAULT_KEEP_LAST = {"hybrid": 10, "summarize_middle": 10, "truncate": 10, "drop_tool_outputs": 10}
SUMMARY_TAG = "compaction_summary"
DEFAULT_INSTRUCTIONS = (
    "Summarize the earlier part of this agent conversation so the agent can continue. "
    "Keep: the task and its constraints, decisions made, files changed, commands run and "
    "their outcomes, open problems and the next step. Drop pleasantries and repeated output."
)
_FAILURE = re.compile(
    r"(\bFAILED\b|\bFAIL:|AssertionError|Traceback \(most recent call last\)|\b\d+ failed\b|"
    r"\bERROR\b.*test|error: test)",
)
_PLAN_TOOLS = frozenset({"todowrite", "update_plan", "agent_progress", "progress", "plan"})
_PLAN_TEXT = re.compile(r"(^|\n)\s*(plan:|## plan|- \[[ x]\] )", re.IGNORECASE)
_WRITE_TOOLS = frozenset({"write", "edit", "multiedit", "notebookedit", "apply_patch"})


@dataclass(frozen=True)
class CompactionPolicy:
    """Typed compaction instructions (seed 001's ``CompactionPolicy`` shape)."""

    instructions: str | None = None
    mode: str = "default"
    scope: str = "summary"
    preserve: tuple[str, ...] = ()
    drop: tuple[str, ...] = ()
    extend_default_instructions: bool = True
    author: str = "host"

    def __post_init__(self) -> None:
        bad = [p for p in self.preserve if p not in PRESERVE_KINDS]
        if bad:
            raise AgentOptionError(
                "compaction_policy.preserve",
                f"unknown kind(s) {', '.join(bad)} (expected {', '.join(PRESERVE_KINDS)})",
            )
        if self.scope not in SCOPES:
            raise AgentOptionError(
                "compaction_policy.scope", f"expected one of {', '.join(SCOPES)}"
            )
        bad_drop = [d for d in self.drop if d not in ("tool_outputs",)]
        if bad_drop:
            raise AgentOptionError("compaction_policy.drop", "expected tool_outputs")

    @classmethod
    def parse(cls, value: Any) -> CompactionPolicy:
        if isinstance(value, CompactionPolicy):
            return value
        if not isinstance(value, Mapping):
            raise AgentOptionError("compaction_policy", "expected a dict or CompactionPolicy")
        known = set(cls.__dataclass_fields__)
        unknown = set(value) - known
        if unknown:
            raise AgentOptionError(
                "compaction_policy", f"unknown key(s) {', '.join(sorted(unknown))}"
            )
        data = dict(value)
        for key in ("preserve", "drop"):
            if key in data:
                data[key] = tuple(data[key])
        return cls(**data)

    def guidance(self) -> str:
        """The summariser's instructions: default rules, then (or instead) the policy's."""
        if not self.instructions:
            return DEFAULT_INSTRUCTIONS
        if self.extend_default_instructions:
            return f"{DEFAULT_INSTRUCTIONS}\n\n{self.instructions}"
        return self.instructions

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["preserve"] = list(self.preserve)
        out["drop"] = list(self.drop)
        return out


def compaction_policy(**fields: Any) -> CompactionPolicy:
    """A :class:`CompactionPolicy` from keyword fields."""
    return CompactionPolicy.parse(fields)


def compact_for_bug_fix_resumption(*, author: str = "host", **extra: Any) -> CompactionPolicy:
    """Keep what resuming a bug fix needs: failing tests, errors, touched files, the plan."""
    return CompactionPolicy.parse(
        {
            "instructions": "The agent is fixing a bug. Keep the failing test and its error "
            "verbatim, the files changed so far, the hypothesis, and the next step.",
            "mode": "bug_fix_resumption",
            "preserve": ("test_failures", "errors", "files_touched", "current_plan"),
            "author": author,
            **extra,
        }
    )


def compact_preserving_test_failures(*, author: str = "host", **extra: Any) -> CompactionPolicy:
    """Keep every recent test-failure output verbatim through compaction."""
    return CompactionPolicy.parse(
        {
            "instructions": "Keep the names and messages of failing tests.",
            "mode": "preserve_test_failures",
            "preserve": ("test_failures",),
            "author": author,
            **extra,
        }
    )


def compact_retaining_current_plan(*, author: str = "host", **extra: Any) -> CompactionPolicy:
    """Keep the latest plan (a plan tool call or a checklist) verbatim through compaction."""
    return CompactionPolicy.parse(
        {
            "instructions": "Keep the current plan and which steps are done.",
            "mode": "retain_current_plan",
            "preserve": ("current_plan",),
            "author": author,
            **extra,
        }
    )


@dataclass
class CompactionConfig:
    strategy: str = "hybrid"
    threshold: int | None = None
    keep_first: int = 0
    keep_last: int = 10
    policy: CompactionPolicy = field(default_factory=CompactionPolicy)
    callback: Callable[..., Any] | None = None
    provider: Any = None
    model: str | None = None
    automatic: bool = True


def _strategy(value: Any, option: str) -> str:
    if value is False or value is None:
        return "none"
    if value is True:
        return "hybrid"
    if value not in STRATEGIES:
        raise AgentOptionError(option, f"expected one of {', '.join(STRATEGIES)}, got {value!r}")
    return str(value)


def _int(option: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise AgentOptionError(option, f"expected an integer >= {minimum}, got {value!r}")
    return value


_DICT_KEYS = {
    "strategy",
    "keep_last_n",
    "keep_first",
    "keep_last",
    "threshold",
    "policy",
    "compaction_policy",
    "provider",
    "model",
    "enabled",
}


def parse_config(options: Mapping[str, Any], model: str | None) -> CompactionConfig | None:
    """Fold ``compaction``, ``auto_compact``, ``compact_*`` and ``compaction_policy``."""
    cfg = CompactionConfig()
    spec = options.get("compaction")
    dicts: list[tuple[str, Mapping[str, Any]]] = []
    if isinstance(spec, Mapping):
        dicts.append(("compaction", spec))
    elif spec is not None:
        cfg.strategy = _strategy(spec, "compaction")
    auto = options.get("auto_compact")
    if auto is False:
        cfg.automatic = False
    elif isinstance(auto, Mapping):
        dicts.append(("auto_compact", auto))
    elif auto not in (None, True):
        raise AgentOptionError("auto_compact", "expected a bool or a dict")
    for name, d in dicts:
        unknown = set(d) - _DICT_KEYS
        if unknown:
            raise AgentOptionError(name, f"unknown key(s) {', '.join(sorted(unknown))}")
        if d.get("enabled") is False:
            cfg.automatic = False
        if "strategy" in d:
            cfg.strategy = _strategy(d["strategy"], f"{name}.strategy")
        for key in ("keep_last_n", "keep_last"):
            if key in d:
                cfg.keep_last = _int(f"{name}.{key}", d[key], 0)
        if "keep_first" in d:
            cfg.keep_first = _int(f"{name}.keep_first", d["keep_first"], 0)
        if "threshold" in d:
            cfg.threshold = _int(f"{name}.threshold", d["threshold"], 1)
        for key in ("policy", "compaction_policy"):
            if key in d:
                cfg.policy = CompactionPolicy.parse(d[key])
        if "provider" in d:
            cfg.provider = d["provider"]
        if "model" in d:
            cfg.model = d["model"]
    if options.get("compact_strategy") is not None:
        cfg.strategy = _strategy(options["compact_strategy"], "compact_strategy")
    if options.get("compaction_policy") is not None:
        cfg.policy = CompactionPolicy.parse(options["compaction_policy"])
    if options.get("compact_threshold") is not None:
        cfg.threshold = _int("compact_threshold", options["compact_threshold"], 1)
    if options.get("compact_keep_first") is not None:
        cfg.keep_first = _int("compact_keep_first", options["compact_keep_first"], 0)
    if options.get("compact_keep_last") is not None:
        cfg.keep_last = _int("compact_keep_last", options["compact_keep_last"], 0)
    elif cfg.strategy == "summarize_all":
        cfg.keep_last = 0
    callback = options.get("compact_callback")
    if callback is not None and not callable(callback):
        raise AgentOptionError("compact_callback", "expected a callable")
    cfg.callback = callback
    if cfg.strategy == "custom" and callback is None:
        raise AgentOptionError("compact_strategy", '"custom" needs compact_callback')
    if callback is not None and cfg.strategy != "custom":
        raise AgentOptionError("compact_callback", 'is used only with compact_strategy "custom"')
    if cfg.strategy == "none":
        return None
    if cfg.threshold is None:
        window = context_window(model)
        if window is not None:
            cfg.threshold = int(window * 0.8)
        # else: learnt from the provider when the run starts (CompactionHook.on_start)
    return cfg


# -- what compaction keeps -------------------------------------------------------------------


def _body(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else json.dumps(content, default=str)


def _is_failure(message: Mapping[str, Any]) -> bool:
    return bool(_FAILURE.search(_body(message)))


def _is_error(message: Mapping[str, Any]) -> bool:
    if message.get("role") != "tool":
        return False
    body = _body(message)
    return '"status": "error"' in body or '"error":' in body or body.startswith("Error")


def _plan_index(messages: list[dict[str, Any]]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        m = messages[index]
        if any(str(c.get("name", "")).lower() in _PLAN_TOOLS for c in m.get("tool_calls") or []):
            return index
        if m.get("role") in ("assistant", "user") and _PLAN_TEXT.search(_body(m)):
            return index
    return None


def _files_touched(messages: list[dict[str, Any]]) -> list[str]:
    files: list[str] = []
    for m in messages:
        for call in m.get("tool_calls") or []:
            if str(call.get("name", "")).lower() in _WRITE_TOOLS:
                args = call.get("arguments") or {}
                path = args.get("path") or args.get("file_path")
                if isinstance(path, str) and path not in files:
                    files.append(path)
    return files


def preserved(archived: list[dict[str, Any]], policy: CompactionPolicy) -> list[dict[str, Any]]:
    """The archived messages a policy keeps verbatim (in their original order)."""
    keep: set[int] = set()
    if "test_failures" in policy.preserve:
        hits = [i for i, m in enumerate(archived) if m.get("role") != "system" and _is_failure(m)]
        keep.update(hits[-3:])
    if "errors" in policy.preserve:
        keep.update([i for i, m in enumerate(archived) if _is_error(m)][-3:])
    if "current_plan" in policy.preserve:
        plan = _plan_index(archived)
        if plan is not None:
            keep.add(plan)
    out = []
    for i in sorted(keep):
        m = archived[i]
        # a preserved message is re-stated as a user note: an orphan tool result (its call
        # was archived) or a tool call without its result would be rejected by providers
        role = "assistant" if m.get("role") == "assistant" else "user"
        label = f" (tool {m.get('name')})" if m.get("role") == "tool" else ""
        out.append({"role": role, "content": f"[preserved{label}] {_body(m)}"})
    return out


def _split(messages: list[dict[str, Any]], keep_first: int, keep_last: int) -> tuple[int, int]:
    """``(start, end)`` of the compactable middle, moved so no tool result is orphaned."""
    start = min(keep_first, len(messages))
    end = max(start, len(messages) - keep_last)
    while end < len(messages) and messages[end].get("role") == "tool":
        end += 1  # the suffix never starts with a tool result: its call goes to the archive
    while start < end and messages[start].get("role") == "tool":
        start += 1
    if start > 0 and messages[start - 1].get("tool_calls"):
        # the kept prefix ends with a call: keep its results with it
        while start < end and messages[start].get("role") == "tool":
            start += 1
    return start, end


def truncate_summary(archived: list[dict[str, Any]], limit: int = 40) -> str:
    """The deterministic abbreviated summary: one line per archived message."""
    lines = []
    for m in archived[-limit:]:
        body = " ".join(_body(m).split())[:120]
        calls = ", ".join(str(c.get("name")) for c in m.get("tool_calls") or [])
        lines.append(f"- {m.get('role')}: {body}" + (f" [calls: {calls}]" if calls else ""))
    more = len(archived) - limit
    head = f"{len(archived)} earlier messages, abbreviated"
    return head + (f" (first {more} omitted)" if more > 0 else "") + ":\n" + "\n".join(lines)


class CompactionHook(LoopHook):
    """Compacts ``run.messages`` before a model call when the prompt is over the threshold."""

    def __init__(self, cfg: CompactionConfig) -> None:
        self.cfg = cfg
        self.counter: MessageCounter | None = None
        self.compactions = 0
        self.run: Any = None
        self._fixed_key: tuple[str, tuple[str, ...]] | None = None
        self._fixed = 0

    async def on_start(self, run: Any, stack: Any) -> None:
        self.run = run
        name = getattr(run.provider, "name", None)
        self.counter = MessageCounter(counter_for(name, run.cfg.model))
        if self.cfg.threshold is None and self.cfg.automatic:
            ask = getattr(run.provider, "context_window", None)
            window = await ask(run.cfg.model) if callable(ask) else None
            if window:
                self.cfg.threshold = int(window * 0.8)
                run.event("context_window_learned", model=run.cfg.model, tokens=window)

    def fixed_cost(self) -> int:
        """Tokens of the effective system prompt and the tool schemas (cached while equal)."""
        assert self.counter is not None
        run = self.run
        tools = [] if run.cfg.fmt == "none" else run.all_tools
        system = run.effective_system(tools) or ""
        key = (system, tuple(t.name for t in tools))
        if key != self._fixed_key:
            schemas = json.dumps([t.schema() for t in tools]) if run.cfg.fmt == "native" else ""
            self._fixed = self.counter.counter.text(system + schemas) + 3
            self._fixed_key = key
        return self._fixed

    def estimate(self) -> int:
        assert self.counter is not None
        return self.counter.total(self.run.messages) + self.fixed_cost()

    async def before_model_call(self, run: Any, iteration: int) -> None:
        if not self.cfg.automatic:
            return
        before = self.estimate()
        if self.cfg.threshold is None:
            if before > UNKNOWN_WINDOW_FLOOR:
                # not sent as is: a model whose window nobody knows would truncate or refuse
                # it silently (a 240k-character prompt went out unchanged to qwen3:8b)
                raise AgentOptionError(
                    "compact_threshold",
                    f"the prompt is about {before} tokens and the context window of model "
                    f"{run.cfg.model!r} on provider {getattr(run.provider, 'name', '?')!r} is "
                    "unknown (not in charter's table, not reported by the provider): set "
                    "compact_threshold (or compaction='none' to send it as is)",
                )
            return
        if before > self.cfg.threshold:
            await self.compact("threshold", before)

    async def compact(self, reason: str, before: int | None = None) -> dict[str, Any] | None:
        """Compact now; returns the ``TranscriptCompacted`` event (``None``: nothing to do)."""
        cfg, run = self.cfg, self.run
        assert self.counter is not None
        before = self.estimate() if before is None else before
        messages: list[dict[str, Any]] = run.messages
        start, end = _split(messages, cfg.keep_first, cfg.keep_last)
        if end - start < 1:
            return None
        archived = messages[start:end]
        policy = cfg.policy
        engine = cfg.strategy
        notes = []
        if "files_touched" in policy.preserve:
            files = _files_touched(archived)
            if files:
                notes.append("Files changed so far: " + ", ".join(files))
        if policy.instructions and policy.scope in ("model_visible", "summary", "transcript"):
            notes.append(f"Instructions ({policy.author}): {policy.instructions}")

        def summarized(summary: str) -> list[dict[str, Any]]:
            text = "\n\n".join([summary, *notes])
            return [
                {"role": "user", "content": f"<{SUMMARY_TAG}>\n{text}\n</{SUMMARY_TAG}>"},
                *preserved(archived, policy),
            ]

        if engine == "drop_tool_outputs":
            middle = [self._stub(m) for m in archived]
        else:
            summary, engine = await self._summary(archived, policy)
            middle = summarized(summary)
        # a rewrite makes a new list: the old one (held by earlier requests) stays as it was
        run.messages = [*messages[:start], *middle, *messages[end:]]
        after = self.estimate()
        fallback = cfg.strategy in ("hybrid", "drop_tool_outputs") and engine != "truncate"
        if fallback and cfg.threshold is not None and after > cfg.threshold:
            # the hard-limit fallback: the summary (or the stubbed middle) is still too long
            middle = summarized(truncate_summary(archived))
            run.messages = [*messages[:start], *middle, *messages[end:]]
            engine = "truncate"
            after = self.estimate()
        messages = run.messages
        self.counter.forget_except(messages)
        run.rewrites += 1
        self.compactions += 1
        event = {
            "reason": reason,
            "strategy": cfg.strategy,
            "engine_strategy": engine,
            "estimated_tokens_before": before,
            "estimated_tokens_after": after,
            "instruction_mode": policy.mode,
            "instruction_source": policy.author if policy.instructions else "default",
            "compaction_policy": policy.to_dict(),
            "archived_messages": len(archived),
            "kept_first": start,
            "kept_last": len(messages) - start - len(middle),
            "token_method": self.counter.counter.method,
            "threshold": cfg.threshold,
        }
        run.event("TranscriptCompacted", **event)
        return event

    def _stub(self, m: dict[str, Any]) -> dict[str, Any]:
        if m.get("role") != "tool":
            return m
        body = _body(m)
        return {**m, "content": f"[tool output dropped by compaction: {len(body)} chars]"}

    async def _summary(
        self, archived: list[dict[str, Any]], policy: CompactionPolicy
    ) -> tuple[str, str]:
        cfg = self.cfg
        if cfg.strategy == "truncate":
            return truncate_summary(archived), "truncate"
        if cfg.strategy == "custom":
            assert cfg.callback is not None
            out = cfg.callback(archived, list(self.run.system_tail.values()), policy)
            if inspect.isawaitable(out):
                out = await out
            if isinstance(out, Mapping):
                out = out.get("summary")
            if not isinstance(out, str):
                raise AgentOptionError("compact_callback", "must return a string or {summary}")
            return out, "custom"
        try:
            return await self._model_summary(archived, policy), "summarize"
        except Exception as exc:  # a failed summary never loses the conversation
            if cfg.strategy != "hybrid":
                raise
            self.run.event("compaction_summary_failed", error=f"{type(exc).__name__}: {exc}")
            return truncate_summary(archived), "truncate"

    async def _model_summary(self, archived: list[dict[str, Any]], policy: CompactionPolicy) -> str:
        run = self.run
        drop_tools = "tool_outputs" in policy.drop
        lines = []
        for m in archived:
            body = _body(m)
            if drop_tools and m.get("role") == "tool":
                body = f"[{len(body)} chars of tool output]"
            calls = json.dumps(m.get("tool_calls"), default=str) if m.get("tool_calls") else ""
            lines.append(f"[{m.get('role')}] {body[:4000]} {calls}".rstrip())
        provider = (
            get_provider(self.cfg.provider) if self.cfg.provider is not None else run.aux_provider
        )
        request = LlmRequest(
            model=self.cfg.model or run.cfg.model,
            system=policy.guidance(),
            messages=[{"role": "user", "content": "\n".join(lines)}],
            purpose="compaction",
        )
        response = await provider.complete(request)
        run.stats.input_tokens += response.input_tokens
        run.stats.output_tokens += response.output_tokens
        text = (response.text or "").strip()
        if not text:
            raise ValueError("the summariser returned no text")
        return text

    def on_finish(self, run: Any) -> None:
        if self.compactions:
            run.extras.setdefault("compaction", {})["compactions"] = self.compactions


#: Tokens below which a prompt fits any model: above it, an unknown window is an error.
UNKNOWN_WINDOW_FLOOR = 8192


def compaction_hook(
    options: Mapping[str, Any], model: str | None, provider: Any = None
) -> CompactionHook | None:
    """The hook, or ``None`` when compaction is off or nothing can measure it (the mock
    provider, whose scripted turns have no window, without a ``compact_threshold``)."""
    cfg = parse_config(options, model)
    if cfg is None:
        return None
    if cfg.threshold is None and getattr(provider, "name", None) == "mock":
        return None
    return CompactionHook(cfg)
