"""Slack through ``slack-sdk``: post a message (or a thread reply), add a reaction.

Both are ``network`` writes (capability ``chat.post``). Slack answers errors as HTTP 200
with ``{"ok": false, "error": "channel_not_found"}``; they become typed errors
(:mod:`charter.tools.errors`) with Slack's error code as the message. A 429's
``Retry-After`` is waited (stamina, with jitter) before the call is tried again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from charter.agent import Tool
from charter.policy import SideEffectLevel, ToolAnnotations

from ._calls import guard, preview
from ._redact import Redactor
from ._retry import Retryable, RetryPolicy, call_with_retries_sync
from .errors import (
    ConnectionFailed,
    Forbidden,
    IntegrationError,
    NotFound,
    RateLimited,
    RemoteError,
    ServiceUnavailable,
    Unauthorized,
)
from .settings import SlackSettings

SERVICE = "slack"
_CODES: dict[str, type[RemoteError]] = {
    "not_authed": Unauthorized,
    "invalid_auth": Unauthorized,
    "token_revoked": Unauthorized,
    "account_inactive": Unauthorized,
    "channel_not_found": NotFound,
    "message_not_found": NotFound,
    "not_in_channel": Forbidden,
    "is_archived": Forbidden,
    "missing_scope": Forbidden,
    "ratelimited": RateLimited,
}


class SlackClient:
    """``chat.postMessage`` and ``reactions.add`` with typed errors and retries."""

    def __init__(
        self,
        settings: SlackSettings,
        *,
        retry: RetryPolicy | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.settings = settings
        self.retry = retry or RetryPolicy()
        self.redactor = redactor or Redactor(settings.secrets())

    def _web(self) -> Any:
        from slack_sdk import WebClient

        self.settings.require()
        base = self.settings.api_url
        return WebClient(token=self.settings.bot_token, base_url=base.rstrip("/") + "/")

    def _call(self, send: Callable[[Any], Any]) -> dict[str, Any]:
        def attempt() -> dict[str, Any]:
            from slack_sdk.errors import SlackApiError

            try:
                resp = send(self._web())
            except SlackApiError as exc:
                raise _classify(exc.response) from None
            except IntegrationError:
                raise
            except OSError as exc:
                raise Retryable(ConnectionFailed(SERVICE, f"{type(exc).__name__}: {exc}")) from None
            data = dict(resp.data) if isinstance(resp.data, dict) else {}
            data["request_id"] = _header(resp.headers, "x-slack-req-id")
            return data

        return call_with_retries_sync(self.retry, attempt)

    @staticmethod
    def post_request(channel: str, text: str, thread_ts: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"channel": channel, "text": text}
        if thread_ts:
            body["thread_ts"] = thread_ts
        return {"method": "POST", "path": "/chat.postMessage", "body": body}

    @staticmethod
    def reaction_request(channel: str, timestamp: str, name: str) -> dict[str, Any]:
        body = {"channel": channel, "timestamp": timestamp, "name": name.strip(":")}
        return {"method": "POST", "path": "/reactions.add", "body": body}

    def post_message(self, channel: str, text: str, thread_ts: str | None = None) -> dict[str, Any]:
        body = self.post_request(channel, text, thread_ts)["body"]
        data = self._call(lambda web: web.chat_postMessage(**body))
        return {
            "status": "ok",
            "request_id": data.get("request_id"),
            "channel": data.get("channel"),
            "ts": data.get("ts"),
            "thread_ts": body.get("thread_ts"),
        }

    def auth_test(self) -> str:
        """Who the bot token is (``auth.test``), for ``charter doctor``."""
        data = self._call(lambda web: web.auth_test())
        return f"{data.get('user')} in {data.get('team')}"

    def add_reaction(self, channel: str, timestamp: str, name: str) -> dict[str, Any]:
        body = self.reaction_request(channel, timestamp, name)["body"]
        data = self._call(lambda web: web.reactions_add(**body))
        return {"status": "ok", "request_id": data.get("request_id"), "name": body["name"]}


def _header(headers: Any, name: str) -> str | None:
    if not headers:
        return None
    for key, value in dict(headers).items():
        if key.lower() == name:
            return str(value[0] if isinstance(value, list) else value)
    return None


def _classify(response: Any) -> Exception:
    status = int(getattr(response, "status_code", 200) or 200)
    data = response.data if isinstance(response.data, dict) else {}
    code = str(data.get("error") or f"HTTP {status}")
    rid = _header(response.headers, "x-slack-req-id")
    if status == 429 or code == "ratelimited":
        wait = _header(response.headers, "retry-after")
        seconds = float(wait) if wait else None
        limited = RateLimited(
            SERVICE, code, http_status=status, request_id=rid, retry_after=seconds
        )
        return Retryable(limited, seconds)
    if status >= 500:
        return Retryable(ServiceUnavailable(SERVICE, code, http_status=status, request_id=rid))
    cls = _CODES.get(code, RemoteError)
    return cls(
        SERVICE, code, http_status=status, request_id=rid, details=data.get("response_metadata")
    )




def slack_tools(client: SlackClient) -> list[Tool]:
    """``slack_post_message`` and ``slack_add_reaction`` (``network``, ``chat.post``)."""
    ann = ToolAnnotations(
        side_effect_level=SideEffectLevel.NETWORK, kind="other", capabilities=("chat.post",)
    )
    url = client.settings.api_url
    return [
        Tool(
            name="slack_post_message",
            handler=guard(client.redactor, client.post_message),
            description="Post a message to a Slack channel; thread_ts replies in a thread.",
            parameters={
                "type": "object",
                "required": ["channel", "text"],
                "properties": {
                    "channel": {"type": "string", "description": "channel id or #name"},
                    "text": {"type": "string"},
                    "thread_ts": {"type": "string", "description": "the parent message's ts"},
                },
            },
            annotations=ann,
            preview=preview(SlackClient.post_request, url),
        ),
        Tool(
            name="slack_add_reaction",
            handler=guard(client.redactor, client.add_reaction),
            description="Add an emoji reaction to a Slack message.",
            parameters={
                "type": "object",
                "required": ["channel", "timestamp", "name"],
                "properties": {
                    "channel": {"type": "string"},
                    "timestamp": {"type": "string"},
                    "name": {"type": "string"},
                },
            },
            annotations=ann,
            preview=preview(SlackClient.reaction_request, url),
        ),
    ]


__all__ = ["SlackClient", "slack_tools"]
