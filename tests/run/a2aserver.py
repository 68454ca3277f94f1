"""A local A2A agent built with the official SDK (``a2a-sdk``), for handoff tests.

It serves its agent card and JSON-RPC on 127.0.0.1, records every message it receives
and completes a task for each (or fails it when the message asks to).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Agent:
    url: str
    received: list[Any] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)


@contextmanager
def a2a_agent() -> Iterator[Agent]:
    import uvicorn
    from a2a.helpers.proto_helpers import new_task_from_user_message
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
        Part,
        TaskState,
    )
    from a2a.utils import TransportProtocol
    from starlette.applications import Starlette

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    agent = Agent(f"http://127.0.0.1:{port}")

    class Reviewer(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            task = context.current_task or new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
            agent.received.append(context.message)
            agent.tasks.append(task.id)
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            reply = updater.new_agent_message([Part(text="received for review")])
            await updater.update_status(TaskState.TASK_STATE_COMPLETED, message=reply)

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            return None

    card = AgentCard(
        name="reviewer",
        description="A remote reviewer agent (test double built with a2a-sdk).",
        version="1.0.0",
        skills=[AgentSkill(id="review", name="review", description="Reviews", tags=["review"])],
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        supported_interfaces=[
            AgentInterface(
                protocol_binding=TransportProtocol.JSONRPC,
                url=f"{agent.url}/",
                protocol_version="1.0",
            )
        ],
    )
    handler = DefaultRequestHandler(
        agent_executor=Reviewer(), task_store=InMemoryTaskStore(), agent_card=card
    )
    app = Starlette(routes=create_jsonrpc_routes(handler, "/") + create_agent_card_routes(card))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the A2A agent did not start"
        time.sleep(0.02)
    try:
        yield agent
    finally:
        server.should_exit = True
        thread.join(timeout=10)
