"""Simulated users for eval harnesses (seed 001 "Simulated users for eval harnesses").

An *answerer* stands in for the human: :func:`scripted_user` (alias
:func:`fixture_user`) replays a script, :func:`agentic_user` asks another model (which
may research with read-only tools). Wire it as an ``ask_user`` tool with
:func:`user_tools`, or as a ``post_turn_callback`` with :func:`simulated_user_post_turn`
for agents that ask in plain text.

Every decision is an audit record ``{event_type, question, reply?, reason?}`` with
``event_type`` one of ``simulated_user_reply``, ``simulated_user_stop``,
``simulated_user_failed``, ``simulated_user_budget_exhausted``: kept in
``answerer.audit`` and, through the tool, in the ``tool_call_audit`` event's ``audit``.
"""

from __future__ import annotations

import abc
import asyncio
import fnmatch
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from charter.policy import SideEffectLevel, ToolAnnotations

from .options import AgentOptionError
from .tools import Tool, as_tools

STOP_WORD = "STOP"


class Answerer(abc.ABC):
    """Base: ``answer(question) -> {action: reply|stop|fail|budget_exhausted, ...}``."""

    def __init__(self, max_replies: int | None) -> None:
        if max_replies is not None and (isinstance(max_replies, bool) or max_replies < 0):
            raise AgentOptionError("max_replies", "expected a non-negative integer")
        self.max_replies = max_replies
        self.replies = 0
        self.audit: list[dict[str, Any]] = []

    def _record(self, event: str, question: str, **data: Any) -> dict[str, Any]:
        record = {"event_type": f"simulated_user_{event}", "question": question, **data}
        self.audit.append(record)
        return record

    def answer(self, question: str) -> dict[str, Any]:
        if self.max_replies is not None and self.replies >= self.max_replies:
            self._record("budget_exhausted", question, reason="max_replies")
            return {"action": "budget_exhausted", "reason": "max_replies"}
        decision = self.decide(question)
        action = decision["action"]
        if action == "reply":
            self.replies += 1
            self._record("reply", question, reply=decision["reply"])
        elif action == "stop":
            self._record("stop", question, reason=decision.get("reason"))
        else:
            self._record("failed", question, reason=decision.get("reason"))
        return decision

    @abc.abstractmethod
    def decide(self, question: str) -> dict[str, Any]:
        """``{"action": "reply", "reply": ...}``, ``{"action": "stop"|"fail", "reason"}``."""


class ScriptedUser(Answerer):
    """Replays a script: strings answer in order; dicts ``{match, reply}`` /
    ``{match, action: "stop"|"fail", reason}`` answer the first question they match
    (a glob, case-insensitive; no ``match`` matches anything)."""

    def __init__(self, script: Sequence[str | Mapping[str, Any]], max_replies: int | None) -> None:
        super().__init__(max_replies)
        self.script: list[dict[str, Any]] = []
        for i, entry in enumerate(script):
            if isinstance(entry, str):
                self.script.append({"reply": entry})
                continue
            if not isinstance(entry, Mapping):
                raise AgentOptionError(f"script[{i}]", "expected a string or a dict")
            unknown = set(entry) - {"match", "reply", "action", "reason"}
            if unknown:
                raise AgentOptionError(f"script[{i}].{sorted(unknown)[0]}", "unknown field")
            action = entry.get("action", "reply")
            if action not in ("reply", "stop", "fail"):
                raise AgentOptionError(f"script[{i}].action", "expected reply, stop or fail")
            if action == "reply" and not isinstance(entry.get("reply"), str):
                raise AgentOptionError(f"script[{i}].reply", "expected a string")
            self.script.append(dict(entry))
        self.used: set[int] = set()

    def decide(self, question: str) -> dict[str, Any]:
        for i, entry in enumerate(self.script):
            if i in self.used:
                continue
            pattern = entry.get("match")
            if pattern is not None and not fnmatch.fnmatch(question.lower(), str(pattern).lower()):
                continue
            self.used.add(i)
            action = entry.get("action", "reply")
            if action == "reply":
                return {"action": "reply", "reply": entry["reply"]}
            return {"action": action, "reason": entry.get("reason")}
        return {"action": "stop", "reason": "script exhausted"}


def scripted_user(
    script: Sequence[str | Mapping[str, Any]], options: Mapping[str, Any] | None = None
) -> ScriptedUser:
    return ScriptedUser(script, (options or {}).get("max_replies"))


fixture_user = scripted_user


class AgenticUser(Answerer):
    """Another model plays the user: a nested ``agent_loop`` per question (bounded by
    ``max_llm_calls`` across the session and ``max_iterations`` per answer). It says
    ``STOP`` when the agent is done."""

    def __init__(
        self,
        goal: str,
        instructions: str,
        tools: Sequence[Tool | Callable[..., Any]],
        provider: Any,
        options: Mapping[str, Any],
    ) -> None:
        super().__init__(options.get("max_replies"))
        self.goal = goal
        self.instructions = instructions
        self.tools = as_tools(list(tools))
        self.provider = provider
        self.max_llm_calls = int(options.get("max_llm_calls", 8))
        self.max_iterations = int(options.get("max_iterations", 4))
        self.max_nudges = int(options.get("max_nudges", 1))
        self.llm_calls = 0

    def decide(self, question: str) -> dict[str, Any]:
        left = self.max_llm_calls - self.llm_calls
        if left <= 0:
            return {"action": "fail", "reason": "max_llm_calls"}
        from .loop import agent_loop_async

        system = (
            f"You are simulating the user. Your goal: {self.goal}\n{self.instructions}\n"
            f"Answer the agent's question as that user. Reply with only {STOP_WORD} when "
            "the agent is done or you have nothing to add."
        )
        coro = agent_loop_async(
            f"The agent asks: {question}",
            system,
            provider=self.provider,
            tools=self.tools,
            max_iterations=min(self.max_iterations, left),
            max_nudges=self.max_nudges,
            tool_surface_narrowing=False,
        )
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            result = asyncio.run(coro)
        else:  # called from a tool inside a running loop: run on a helper thread
            import concurrent.futures

            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                result = pool.submit(asyncio.run, coro).result()
        self.llm_calls += result.llm.iterations
        reply = result.visible_text.strip()
        if result.status == "provider_error":
            return {"action": "fail", "reason": str((result.error or {}).get("message"))}
        if not reply or reply.upper().startswith(STOP_WORD):
            return {"action": "stop", "reason": "agentic user chose silence"}
        return {"action": "reply", "reply": reply}


def agentic_user(
    goal: str,
    instructions: str,
    tools: Sequence[Tool | Callable[..., Any]] = (),
    provider: Any = "mock",
    options: Mapping[str, Any] | None = None,
) -> AgenticUser:
    return AgenticUser(goal, instructions, tools, provider, options or {})


def simulated_user_read_tools(workspace: str | None = None) -> list[Tool]:
    """Read-only research tools for an agentic user (read, glob, grep)."""
    from .builtins import builtin_tools

    return builtin_tools(workspace, names=("read", "glob", "grep"))


def answer_callback(answerer: Answerer) -> Callable[[str], dict[str, Any]]:
    """``question -> tool result``: the answerer behind an ``ask_user`` tool (also what
    ``builtin_tools(ask_user=...)`` and a persona run's simulated user take)."""

    def ask_user(question: str) -> dict[str, Any]:
        decision = answerer.answer(question)
        audit = answerer.audit[-1]
        if decision["action"] == "reply":
            return {"status": "ok", "reply": decision["reply"], "audit": audit}
        if decision["action"] == "stop":
            return {
                "status": "ok",
                "reply": "The user has nothing to add. Finish the task now.",
                "audit": audit,
            }
        return {
            "status": "error",
            "error": f"no user reply ({decision.get('reason')})",
            "audit": audit,
        }

    return ask_user


def user_tools(answerer: Answerer, tools: Sequence[Tool | Callable[..., Any]] = ()) -> list[Tool]:
    """``tools`` plus an ``ask_user`` tool answered by ``answerer``."""

    ask = Tool(
        name="ask_user",
        handler=answer_callback(answerer),
        description="Ask the user a clarification question.",
        parameters={
            "type": "object",
            "properties": {"question": {"type": "string"}},
            "required": ["question"],
        },
        annotations=ToolAnnotations(SideEffectLevel.NONE, "other"),
    )
    return [*as_tools(list(tools)), ask]


def simulated_user_post_turn(answerer: Answerer) -> Callable[[dict[str, Any]], Any]:
    """A ``post_turn_callback``: a text-only turn that asks a question gets the
    answerer's reply as the next user message; silence stops the loop."""

    def callback(info: dict[str, Any]) -> Any:
        text = str(info.get("visible_text") or "")
        if info.get("has_tool_calls") or "?" not in text:
            return None
        decision = answerer.answer(text)
        if decision["action"] == "reply":
            return {"message": decision["reply"]}
        return {"stop": True, "stop_reason": f"simulated_user_{decision['action']}"}

    return callback
