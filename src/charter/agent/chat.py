"""``agent_chat_loop``: an operator-typed chat around ``agent_loop`` (seed 001).

The chat owns one session (``session_id``, persisted like any session): before each model
turn it calls ``on_user_input(state)``, which returns ``{kind: "message", text}`` (run a
turn), ``{kind: "handled", message}`` (answered by the harness, e.g. a slash command) or
``{kind: "exit", reason}``. After each turn ``on_model_turn(turn, state)`` may return
``{state}``. The model gets a ``wait_for_user`` tool (``wait_for_user_tool: False`` drops
it): calling it ends the current turn with ``stop_reason: "wait_for_user"`` and control
returns to ``on_user_input``. When the chat ends the session is closed with a typed
reason (a ``closed`` record in the session store) unless ``close_session: False``.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from .options import AgentOptionError
from .sessions import SessionStore, open_store
from .tools import make_tool

_CHAT_KEYS = (
    "on_user_input",
    "on_model_turn",
    "close_session",
    "wait_for_user_tool",
    "state",
    "max_turns",
    "system",
)
EXIT_WORDS = ("/exit", "/quit")


def _wait_for_user(reason: str = "") -> dict[str, Any]:
    """Stop this turn and wait for the user's next message."""
    return {"status": "ok", "waiting_for_user": True, "reason": reason}


def agent_chat_route_input(
    line: str,
    state: Mapping[str, Any],
    routes: Mapping[str, Callable[[dict[str, Any]], Any]] | None = None,
) -> dict[str, Any]:
    """Route one typed line: ``/exit`` / ``/quit`` end the chat, a ``/command`` in
    ``routes`` is handled by its function (``{kind: "handled", message}``), anything else
    is a message for the model."""
    text = line.strip()
    if text in EXIT_WORDS:
        return {"kind": "exit", "reason": "user_exit"}
    if text.startswith("/"):
        command = text.split()[0]
        handler = (routes or {}).get(command)
        if handler is None:
            known = ", ".join(sorted([*(routes or {}), *EXIT_WORDS]))
            return {"kind": "handled", "message": f"unknown command {command} (known: {known})"}
        out = handler({"line": text, "command": command, "state": dict(state)})
        return dict(out) if isinstance(out, Mapping) else {"kind": "handled", "message": str(out)}
    return {"kind": "message", "text": text}


def agent_chat_loop(config: Mapping[str, Any]) -> dict[str, Any]:
    """Run the chat until ``on_user_input`` says exit (or ``max_turns`` model turns)."""
    from .loop import agent_loop

    on_input = config.get("on_user_input")
    if not callable(on_input):
        raise AgentOptionError("on_user_input", "agent_chat_loop needs an on_user_input callable")
    on_turn = config.get("on_model_turn")
    if on_turn is not None and not callable(on_turn):
        raise AgentOptionError("on_model_turn", "expected a callable")
    options = {k: v for k, v in config.items() if k not in _CHAT_KEYS}
    session_id = str(options.pop("session_id", None) or f"chat_{uuid.uuid4().hex[:12]}")
    store = open_store(options.get("session_store"))
    tools = list(options.pop("tools", None) or [])
    if config.get("wait_for_user_tool", True):
        tools.append(
            make_tool(
                _wait_for_user,
                name="wait_for_user",
                annotations={"side_effect_level": "none"},
            )
        )
    user_post = options.pop("post_turn_callback", None)

    def post_turn(turn: dict[str, Any]) -> Any:
        if "wait_for_user" in turn.get("successful_tool_names", []):
            return {"stop": True, "stop_reason": "wait_for_user"}
        return user_post(turn) if user_post is not None else None

    state: dict[str, Any] = dict(config.get("state") or {})
    max_turns = config.get("max_turns")
    turns: list[dict[str, Any]] = []
    handled: list[str] = []
    reason = "max_turns"
    while max_turns is None or len(turns) < int(max_turns):
        state["session_id"] = session_id
        state["turns"] = len(turns)
        request = on_input(state)
        if inspect.isawaitable(request):
            raise AgentOptionError("on_user_input", "must be synchronous")
        if not isinstance(request, Mapping) or request.get("kind") not in (
            "message",
            "handled",
            "exit",
        ):
            raise AgentOptionError("on_user_input", "must return {kind: message|handled|exit, ...}")
        if request["kind"] == "exit":
            reason = str(request.get("reason") or "exit")
            break
        if request["kind"] == "handled":
            handled.append(str(request.get("message") or ""))
            continue
        result = agent_loop(
            str(request.get("text") or ""),
            config.get("system"),
            session_id=session_id,
            tools=tools,
            post_turn_callback=post_turn,
            **options,
        )
        turn = result.to_dict()
        turn["stop_reason"] = result.stop_reason
        turns.append(turn)
        if on_turn is not None:
            out = on_turn(turn, state)
            if isinstance(out, Mapping) and isinstance(out.get("state"), Mapping):
                state = dict(out["state"])
    if config.get("close_session", True) and isinstance(store, SessionStore):
        store.append(session_id, [{"type": "closed", "reason": reason}])
    return {
        "status": "closed" if config.get("close_session", True) else "open",
        "reason": reason,
        "session_id": session_id,
        "turns": len(turns),
        "handled": handled,
        "state": state,
        "last": turns[-1] if turns else None,
    }
