"""The provider contract: one request in, one normalised response out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from charter.errors import CharterError


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """A tool call the model emitted (native or parsed from ``<tool_call>`` text)."""

    id: str
    name: str
    arguments: Mapping[str, Any]
    #: Set when the arguments were not valid JSON: the call is rejected with this error.
    parse_error: str | None = None


@dataclass(frozen=True, slots=True)
class LlmRequest:
    """What the loop asks a provider for. ``messages`` use charter's neutral shape.

    Neutral messages: ``{"role": "user"|"assistant"|"tool", "content": str}``; assistant
    messages may carry ``tool_calls: [{id, name, arguments}]`` and ``reasoning`` (the
    provider blocks of :attr:`LlmResponse.reasoning`); tool messages carry
    ``tool_call_id`` and ``name``.

    ``messages`` and ``tools`` are the loop's own lists, shared with later turns (the
    tool schemas are built once per tool surface): a provider reads them and must copy
    before changing anything.
    """

    model: str | None
    system: str | None
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    #: ``"turn"`` for agent turns, ``"judge"`` for structured judge calls.
    purpose: str = "turn"


def new_request(
    model: str | None,
    system: str | None,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    tool_choice: str | None,
    options: Mapping[str, Any],
    purpose: str = "turn",
) -> LlmRequest:
    """``LlmRequest(model, system, messages, tools, tool_choice, options, purpose)``, the
    same object, built without the frozen dataclass's ``__init__``: that sets each field
    through ``object.__setattr__`` by name, which is most of a request's cost, and the loop
    builds one every turn. These are the slots' own setters."""
    request = _NEW(LlmRequest)
    _SET_MODEL(request, model)
    _SET_SYSTEM(request, system)
    _SET_MESSAGES(request, messages)
    _SET_TOOLS(request, tools)
    _SET_TOOL_CHOICE(request, tool_choice)
    _SET_OPTIONS(request, options)
    _SET_PURPOSE(request, purpose)
    return request


_NEW = object.__new__
_SET_MODEL = LlmRequest.__dict__["model"].__set__
_SET_SYSTEM = LlmRequest.__dict__["system"].__set__
_SET_MESSAGES = LlmRequest.__dict__["messages"].__set__
_SET_TOOLS = LlmRequest.__dict__["tools"].__set__
_SET_TOOL_CHOICE = LlmRequest.__dict__["tool_choice"].__set__
_SET_OPTIONS = LlmRequest.__dict__["options"].__set__
_SET_PURPOSE = LlmRequest.__dict__["purpose"].__set__


@dataclass(frozen=True, slots=True)
class LlmResponse:
    """A normalised model reply."""

    text: str = ""
    tool_calls: tuple[ToolCallRequest, ...] = ()
    input_tokens: int = 0
    output_tokens: int = 0
    finish_reason: str | None = None
    model: str | None = None
    raw: Any = None
    #: Provider reasoning blocks to send back with this turn (Anthropic ``thinking`` /
    #: ``redacted_thinking`` blocks, signatures included: the API requires them on the
    #: assistant turn that precedes a tool result when thinking is on).
    reasoning: tuple[Mapping[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "tool_calls": [
                {"id": c.id, "name": c.name, "arguments": dict(c.arguments)}
                for c in self.tool_calls
            ],
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "finish_reason": self.finish_reason,
            "model": self.model,
        }


class ProviderError(CharterError):
    """A failed provider request, classified so the loop can report it as a dict.

    ``category``: ``rate_limit`` | ``server`` | ``client`` | ``auth`` | ``protocol`` |
    ``connection`` | ``timeout`` | ``scripted``. ``retryable`` drives ``with_retry``;
    ``retry_after`` is the server's ``Retry-After`` in seconds (the retry waits at least
    that long, see :mod:`charter.agent.retrying`).
    """

    def __init__(
        self,
        message: str,
        *,
        category: str = "server",
        reason: str | None = None,
        kind: str | None = None,
        status_code: int | None = None,
        retryable: bool | None = None,
        provider: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.category = category
        self.reason = reason or category
        self.kind = kind or type(self).__name__
        self.status_code = status_code
        self.retryable = (
            retryable
            if retryable is not None
            else category in ("rate_limit", "server", "connection", "timeout")
        )
        self.provider = provider
        #: Seconds the server asked the client to wait (``Retry-After``), when it said.
        self.retry_after = retry_after

    def to_dict(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "reason": self.reason,
            "kind": self.kind,
            "message": self.message,
            "status_code": self.status_code,
            "retry_after": self.retry_after,
        }


def classify_status(status: int | None) -> str:
    """Map an HTTP status to a :class:`ProviderError` category."""
    if status is None:
        return "server"
    if status == 429:
        return "rate_limit"
    if status in (401, 403):
        return "auth"
    if status >= 500:
        return "server"
    return "client"


@runtime_checkable
class Provider(Protocol):
    """Anything with a ``name`` and an async ``complete``."""

    name: str

    async def complete(self, request: LlmRequest) -> LlmResponse: ...
