"""``a2a://`` handoff targets, sent with the official A2A Python SDK (``a2a-sdk``).

After ``persona.handoff.dispatched`` is recorded, the handoff goes to the remote agent as
one A2A message (JSON-RPC ``SendMessage``): the summary as text, the payload as a data
part, the handoff id as the message id and kind/route/source as metadata. The remote
task id and status come back as a receipt, ``persona.handoff.delivered``; a failure
(no agent card, refused, unreachable, the SDK not installed) is
``persona.handoff.failed`` with the reason: never silently dropped.

Which agent card a target names comes from configuration: ``$CHARTER_A2A_AGENTS`` maps
targets to base URLs (JSON ``{"a2a://reviewer.example.com/tasks":
"https://reviewer.example.com/tasks"}``); an unmapped ``a2a://host[:port]/path`` is
``https://host[:port]/path``. The card is read from ``<base>/.well-known/agent-card.json``.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from charter.errors import CharterError
from charter.runtime import Batch, HandoffRecord, Kind, PersonaRuntime

A2A_AGENTS_ENV = "CHARTER_A2A_AGENTS"
TIMEOUT = 30.0


class A2AConfigError(CharterError, ValueError):
    """``$CHARTER_A2A_AGENTS`` that is not a JSON object of strings."""


def agents_from_env(env: Mapping[str, str]) -> dict[str, str]:
    text = env.get(A2A_AGENTS_ENV)
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise A2AConfigError(f"${A2A_AGENTS_ENV}: not JSON ({exc})") from None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise A2AConfigError(f"${A2A_AGENTS_ENV}: expected an object of target -> base URL")
    return dict(data)


def base_url(target: str, env: Mapping[str, str]) -> str:
    """The agent's base URL for ``target`` (configured, else https of the target)."""
    agents = agents_from_env(env)
    if target in agents:
        return agents[target].rstrip("/")
    return "https://" + target.removeprefix("a2a://").rstrip("/")


async def _send(url: str, record: HandoffRecord) -> dict[str, Any]:
    import httpx
    from a2a.client import ClientConfig, create_client
    from a2a.types import Message, Part, Role, SendMessageRequest, TaskState
    from google.protobuf.struct_pb2 import Struct, Value

    data = Struct()
    data.update(json.loads(json.dumps(record.handoff.payload, default=str)))
    parts = [Part(text=record.handoff.summary or f"{record.handoff.kind} handoff")]
    parts.append(Part(data=Value(struct_value=data)))
    message = Message(
        role=Role.ROLE_USER,
        message_id=record.handoff_id,
        parts=parts,
        metadata={
            "charter_handoff_id": record.handoff_id,
            "kind": record.handoff.kind,
            "from": record.handoff.from_persona,
            "route_id": record.route.route_id,
        },
    )
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        client = await create_client(
            url, client_config=ClientConfig(streaming=False, httpx_client=http)
        )
        out: dict[str, Any] = {}
        async for response in client.send_message(request=SendMessageRequest(message=message)):
            if response.HasField("task"):
                out = {
                    "remote_task_id": response.task.id,
                    "remote_context_id": response.task.context_id,
                    "remote_status": TaskState.Name(response.task.status.state),
                }
            elif response.HasField("message"):
                out = {
                    "remote_task_id": response.message.task_id or None,
                    "remote_context_id": response.message.context_id or None,
                    "remote_status": "MESSAGE",
                }
        if not out:
            raise RuntimeError("the agent answered with neither a task nor a message")
        return out


def deliver(
    runtime: PersonaRuntime, record: HandoffRecord, *, at: datetime, env: Mapping[str, str] | None
) -> dict[str, Any]:
    """Send one dispatched ``a2a://`` handoff and record the outcome as a receipt."""
    environ = os.environ if env is None else env
    target = record.route.target
    common: dict[str, Any] = {
        "handoff_id": record.handoff_id,
        "target": target,
        "transport": "a2a",
    }
    try:
        url = base_url(target, environ)
        common["agent_url"] = url
        result = asyncio.run(_send(url, record))
        kind, payload = Kind.HANDOFF_DELIVERED, {**common, **result}
    except ImportError:
        kind = Kind.HANDOFF_FAILED
        payload = {**common, "error": "a2a-sdk is not installed (pip install 'charter[a2a]')"}
    except Exception as exc:  # the remote's failure is this handoff's failure, recorded
        kind = Kind.HANDOFF_FAILED
        payload = {**common, "error": f"{type(exc).__name__}: {exc}"}

    def body(batch: Batch) -> dict[str, Any]:
        event = batch.emit(record.handoff.from_persona, kind, payload)
        return {"event_id": event.event_id, "status": kind.rsplit(".", 1)[1], **payload}

    return runtime.transact(at, body)


__all__ = ["A2A_AGENTS_ENV", "A2AConfigError", "agents_from_env", "base_url", "deliver"]
