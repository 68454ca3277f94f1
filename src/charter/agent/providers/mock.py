"""The ``mock`` provider: deterministic scripted turns for tests, demos and evals.

A script is a list of entries, replayed in order (judge calls use ``judge_turns``;
compaction summaries and scratchpad reorganizations use ``aux_turns``, or a deterministic
stand-in, so they never consume the conversation's script):

- ``"text"``: a plain text reply;
- ``{"text": ..., "tool_calls": [{"name", "arguments", "id"?}], "usage": {...}}``:
  native tool calls and token usage (``input_tokens`` / ``output_tokens``);
- ``{"text_tool_calls": [{"name", "arguments"}]}``: tool calls rendered as
  ``<tool_call>`` tags in the text (text-mode);
- ``{"error": {"category", "message", "status_code"?, "retryable"?}}``: a provider error;
- a callable ``(LlmRequest) -> entry`` for replies that depend on the request.

Scripts load from JSON or YAML fixtures with :meth:`MockProvider.from_file`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..streaming import current_sink, emit_text
from .base import LlmRequest, LlmResponse, ProviderError, ToolCallRequest

Entry = str | Mapping[str, Any] | LlmResponse | Callable[[LlmRequest], Any]


def render_text_tool_call(name: str, arguments: Mapping[str, Any]) -> str:
    """The ``<tool_call>`` text form of one call."""
    return "<tool_call>" + json.dumps({"name": name, "arguments": dict(arguments)}) + "</tool_call>"


def _aux_default(request: LlmRequest) -> str:
    """A deterministic stand-in for a summariser / scratchpad call."""
    if request.purpose == "scratchpad":
        return '{"goals": [], "open_items": [], "facts": [], "refs": []}'
    chars = sum(len(str(m.get("content") or "")) for m in request.messages)
    return f"mock summary of {chars} characters of earlier conversation"


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


class MessagesView(Sequence[dict[str, Any]]):
    """The first ``n`` messages of a list that only grows: a recorded request's prompt,
    O(1) to take (the loop never rewrites a list in place; rewrites make new lists)."""

    __slots__ = ("_items", "_n")

    def __init__(self, items: Sequence[dict[str, Any]]) -> None:
        self._items = items
        self._n = len(items)

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return list(self._items[: self._n])[index]
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError(index)
        return self._items[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return list(self) == list(other)
        return NotImplemented

    def __repr__(self) -> str:
        return repr(list(self))


class MockProvider:
    """Replays scripted turns. ``requests`` records every request it was sent."""

    name = "mock"

    def __init__(
        self,
        turns: Sequence[Entry] | None = None,
        *,
        judge_turns: Sequence[Entry] | None = None,
        aux_turns: Sequence[Entry] | None = None,
        default: Entry | None = None,
        cycle: bool = False,
    ) -> None:
        self.turns: list[Entry] = list(turns or [])
        self.judge_turns: list[Entry] = list(judge_turns or [])
        self.aux_turns: list[Entry] = list(aux_turns or [])
        self._aux_index = 0
        self.default = default
        self.cycle = cycle
        self.requests: list[LlmRequest] = []
        self._index = 0
        self._judge_index = 0
        self._ids = 0

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> MockProvider:
        """Load ``{"turns": [...], "judge_turns": [...]}`` (or a bare list) from JSON/YAML."""
        text = Path(path).read_text(encoding="utf-8")
        if str(path).endswith((".yaml", ".yml")):
            import yaml

            data: Any = yaml.safe_load(text)
        else:
            data = json.loads(text)
        if isinstance(data, list):
            data = {"turns": data}
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a list of turns or an object with 'turns'")
        return cls(
            data.get("turns"),
            judge_turns=data.get("judge_turns"),
            default=data.get("default"),
            cycle=bool(data.get("cycle", False)),
            **kwargs,
        )

    @property
    def remaining(self) -> int:
        return len(self.turns) - self._index

    def _next(self, request: LlmRequest) -> Entry:
        if request.purpose in ("compaction", "scratchpad") and not self.aux_turns:
            # helper calls never consume the scripted conversation
            return _aux_default(request)
        if request.purpose in ("compaction", "scratchpad"):
            entry = self.aux_turns[min(self._aux_index, len(self.aux_turns) - 1)]
            self._aux_index += 1
            return entry
        if request.purpose == "judge":
            if not self.judge_turns:
                return '{"verdict": "done", "reasoning": "mock judge default"}'
            entry = self.judge_turns[min(self._judge_index, len(self.judge_turns) - 1)]
            self._judge_index += 1
            return entry
        if self._index < len(self.turns):
            entry = self.turns[self._index]
            self._index += 1
            return entry
        if self.cycle and self.turns:
            entry = self.turns[self._index % len(self.turns)]
            self._index += 1
            return entry
        if self.default is not None:
            return self.default
        if not self.turns:
            return "mock response"
        raise ProviderError(
            f"mock script exhausted after {len(self.turns)} turn(s)",
            category="scripted",
            reason="script_exhausted",
            retryable=False,
            provider="mock",
        )

    async def complete(self, request: LlmRequest) -> LlmResponse:
        self.requests.append(replace(request, messages=MessagesView(request.messages)))  # type: ignore[arg-type]
        entry = self._next(request)
        if callable(entry) and not isinstance(entry, LlmResponse):
            entry = entry(request)
        response = self._response(entry, request)
        if response.text and current_sink() is not None:
            emit_text(response.text)  # a scripted turn streams as one delta
        return response

    def _response(self, entry: Any, request: LlmRequest) -> LlmResponse:
        if isinstance(entry, LlmResponse):
            return entry
        if isinstance(entry, str):
            entry = {"text": entry}
        if not isinstance(entry, Mapping):
            raise TypeError(f"mock turn: expected a string or a dict, got {type(entry).__name__}")
        if "error" in entry:
            err = entry["error"]
            if isinstance(err, str):
                err = {"message": err}
            raise ProviderError(
                str(err.get("message", "scripted error")),
                category=str(err.get("category", "server")),
                reason=err.get("reason"),
                kind=err.get("kind", "MockProviderError"),
                status_code=err.get("status_code"),
                retryable=err.get("retryable"),
                provider="mock",
            )
        text = str(entry.get("text", ""))
        for call in entry.get("text_tool_calls", ()):
            text += render_text_tool_call(call["name"], call.get("arguments", {}))
        calls: list[ToolCallRequest] = []
        for call in entry.get("tool_calls", ()):
            self._ids += 1
            calls.append(
                ToolCallRequest(
                    id=str(call.get("id") or f"call_{self._ids}"),
                    name=str(call["name"]),
                    arguments=dict(call.get("arguments") or {}),
                )
            )
        usage = entry.get("usage") or {}
        last = request.messages[-1] if request.messages else {}
        prompt_chars = len(str(last.get("content") or ""))
        return LlmResponse(
            text=text,
            tool_calls=tuple(calls),
            input_tokens=int(usage.get("input_tokens", prompt_chars // 4)),
            output_tokens=int(usage.get("output_tokens", _estimate_tokens(text))),
            finish_reason="tool_calls" if calls else "stop",
            model=request.model or "mock",
        )
