"""One model call of the loop: the ``llm_caller`` chain inside a ``chat`` span."""

from __future__ import annotations

import inspect
import types
from typing import Any

from . import telemetry
from .callers import LlmCaller, call_caller, checked_reply
from .providers import LlmRequest


async def call_model(
    caller: LlmCaller, call: dict[str, Any], request: LlmRequest, provider: Any
) -> dict[str, Any]:
    """Run ``caller`` on ``call``; a failure becomes ``{ok: False}``, never an exception.

    With a tracer the call is a GenAI ``chat`` span; without one (the common case) the
    span's attributes are not even built.
    """
    if telemetry.tracer() is None:
        # ``call_caller`` inlined: one coroutine less per turn
        try:
            reply = caller(call)
            if type(reply) is types.CoroutineType or inspect.isawaitable(reply):
                reply = await reply
            return checked_reply(reply)
        except Exception as exc:
            return {"ok": False, "status": "provider_error", "error": exc}
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": getattr(provider, "name", None),
        "gen_ai.request.model": request.model,
        "gen_ai.conversation.id": call["turn"]["session_id"],
    }
    with telemetry.span(f"chat {request.model or ''}".strip(), attributes) as current:
        reply = await _reply(caller, call)
        if reply.get("ok"):
            response = reply["value"]
            telemetry.annotate(
                current,
                {
                    "gen_ai.response.model": getattr(response, "model", None),
                    "gen_ai.usage.input_tokens": getattr(response, "input_tokens", None),
                    "gen_ai.usage.output_tokens": getattr(response, "output_tokens", None),
                },
            )
        else:
            telemetry.error(current, str(reply.get("status") or "provider_error"))
        return reply


async def _reply(caller: LlmCaller, call: dict[str, Any]) -> dict[str, Any]:
    try:
        return await call_caller(caller, call)
    except Exception as exc:
        return {"ok": False, "status": "provider_error", "error": exc}
