"""``transcript_projection``: a per-turn model-visible view over the unchanged transcript.

The loop's recorded messages are never modified by a projection; each request is built
from the projection of them. Policies (a string, a dict ``{policy, ...}`` or a list of
them, applied in order):

- ``clean_tool_repair``: drop tool results whose call is not in the prompt, and add a
  ``[no result recorded]`` result for a call that has none (a crash between the call and
  its result, or a hand-edited history), so providers accept the prompt;
- ``squash_failed_calls``: a failed tool result followed later by a success of the same
  tool is shortened to one line (the failure is kept, its bulk is not);
- ``summary_prefix``: ``{text}`` is put before the first message as a summary of what
  came before (for hosts that keep their own summaries);
- ``reachability_gc``: tool-result bodies not referenced by the scratchpad, by a later
  message, or within the last ``keep_recent`` messages become stubs naming their call id;
- ``custom``: ``{callback}`` maps ``(messages, context)`` to the messages to send.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .options import AgentOptionError

Projection = Callable[[list[dict[str, Any]], Any], list[dict[str, Any]]]
POLICIES = (
    "clean_tool_repair",
    "squash_failed_calls",
    "summary_prefix",
    "reachability_gc",
    "custom",
)


def _failed(message: Mapping[str, Any]) -> bool:
    body = str(message.get("content") or "")
    return '"status": "error"' in body or '"error": "' in body


def clean_tool_repair(messages: list[dict[str, Any]], run: Any = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    pending: list[str] = []

    def close() -> None:
        for call_id in pending:
            out.append({"role": "tool", "tool_call_id": call_id, "content": "[no result recorded]"})
        pending.clear()

    for m in messages:
        if m.get("role") == "tool":
            if m.get("tool_call_id") in pending:
                pending.remove(m["tool_call_id"])
                out.append(m)
            continue  # an orphan result: its call is not in the prompt
        close()
        out.append(m)
        pending.extend(str(c.get("id")) for c in m.get("tool_calls") or [])
    close()
    return out


def squash_failed_calls(messages: list[dict[str, Any]], run: Any = None) -> list[dict[str, Any]]:
    names: dict[str, str] = {}
    for m in messages:
        for c in m.get("tool_calls") or []:
            names[str(c.get("id"))] = str(c.get("name"))
    later_ok: set[str] = set()
    squash: set[int] = set()
    for index in range(len(messages) - 1, -1, -1):
        m = messages[index]
        if m.get("role") != "tool":
            continue
        name = m.get("name") or names.get(str(m.get("tool_call_id")), "")
        if _failed(m):
            if name in later_ok:
                squash.add(index)
        else:
            later_ok.add(name)
    out = []
    for index, m in enumerate(messages):
        if index in squash:
            first = " ".join(str(m.get("content") or "").split())[:120]
            m = {**m, "content": f"[failed attempt, later retried successfully] {first}"}
        out.append(m)
    return out


def _summary_prefix(text: str) -> Projection:
    def project(messages: list[dict[str, Any]], run: Any = None) -> list[dict[str, Any]]:
        return [{"role": "user", "content": f"<summary>\n{text}\n</summary>"}, *messages]

    return project


def _reachability_gc(keep_recent: int) -> Projection:
    def project(messages: list[dict[str, Any]], run: Any = None) -> list[dict[str, Any]]:
        roots: set[str] = set()
        pad = getattr(run, "scratchpad_refs", None)
        if pad:
            roots.update(pad())
        horizon = max(0, len(messages) - keep_recent)
        # a message that names a call id (in text or in arguments) keeps that result reachable
        parts = []
        for m in messages:
            if m.get("role") != "tool":
                parts.append(str(m.get("content") or ""))
                parts.extend(str(c.get("arguments")) for c in m.get("tool_calls") or [])
        haystack = "\n".join(parts)
        for m in messages[:horizon]:
            call_id = str(m.get("tool_call_id") or "")
            if call_id and call_id in haystack:
                roots.add(call_id)
        out = []
        for index, m in enumerate(messages):
            call_id = str(m.get("tool_call_id") or "")
            if m.get("role") == "tool" and index < horizon and call_id not in roots:
                size = len(str(m.get("content") or ""))
                m = {**m, "content": f"[tool result {call_id} elided: {size} chars, unreferenced]"}
            out.append(m)
        return out

    return project


def _custom(callback: Any) -> Projection:
    if not callable(callback):
        raise AgentOptionError("transcript_projection.callback", "expected a callable")

    def project(messages: list[dict[str, Any]], run: Any = None) -> list[dict[str, Any]]:
        out = callback([dict(m) for m in messages], {"iteration": getattr(run, "iteration", None)})
        if not isinstance(out, list):
            raise AgentOptionError(
                "transcript_projection.callback", "must return a list of messages"
            )
        return out

    return project


def _one(spec: Any) -> Projection:
    if callable(spec):
        return _custom(spec)
    data: dict[str, Any] = {"policy": spec} if isinstance(spec, str) else dict(spec)
    policy = data.get("policy")
    if policy == "clean_tool_repair":
        return clean_tool_repair
    if policy == "squash_failed_calls":
        return squash_failed_calls
    if policy == "summary_prefix":
        if not isinstance(data.get("text"), str):
            raise AgentOptionError("transcript_projection.text", "summary_prefix needs text")
        return _summary_prefix(data["text"])
    if policy == "reachability_gc":
        keep = data.get("keep_recent", 6)
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
            raise AgentOptionError("transcript_projection.keep_recent", "expected an integer >= 0")
        return _reachability_gc(keep)
    if policy == "custom":
        return _custom(data.get("callback"))
    raise AgentOptionError(
        "transcript_projection", f"unknown policy {policy!r} (expected {', '.join(POLICIES)})"
    )


def projections(spec: Any) -> list[Projection]:
    """The projection functions ``transcript_projection`` asks for, in order."""
    if spec is None or spec is False:
        return []
    items = spec if isinstance(spec, list) else [spec]
    for item in items:
        if not (isinstance(item, (str, Mapping)) or callable(item)):
            raise AgentOptionError("transcript_projection", "expected a policy name, dict or list")
    return [_one(item) for item in items]
