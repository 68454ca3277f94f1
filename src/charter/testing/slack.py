"""A fake Slack Web API on 127.0.0.1: ``chat.postMessage``, ``reactions.add``, ``auth.test``.

As Slack does: ``POST /api/{method}`` with a bot token (``Authorization: Bearer
xoxb-…``), bodies as JSON or form fields, answers HTTP 200 ``{"ok": true, …}`` or
``{"ok": false, "error": "channel_not_found"}``, a rate limit as HTTP 429 with
``Retry-After``, and an ``x-slack-req-id`` header. Point ``SLACK_API_URL`` at
``fake.api_url``. :attr:`messages` holds what was posted (with ``thread_ts``),
:attr:`reactions` the reactions.
"""

from __future__ import annotations

import itertools
import re
import secrets
from collections.abc import Sequence
from typing import Any

from ._server import FakeServer, RecordedRequest, Reply


class FakeSlack(FakeServer):
    service = "slack"

    def __init__(
        self,
        *,
        tokens: Sequence[str] = ("xoxb-charter-fake-token",),
        channels: Sequence[str] = ("C0INCIDENTS",),
        names: dict[str, str] | None = None,
        tls: bool = False,
    ) -> None:
        super().__init__(tls=tls)
        self.tokens = set(tokens)
        self.channels = set(channels)
        #: ``#name`` -> channel id
        self.names = dict(names or {"#incidents": "C0INCIDENTS"})
        self.member_of = set(self.channels)
        self.messages: list[dict[str, Any]] = []
        self.reactions: list[dict[str, Any]] = []
        self._ts = itertools.count(1)
        self.route("POST", "/api/auth.test", self._auth_test)
        self.route("POST", "/api/chat.postMessage", self._post)
        self.route("POST", "/api/reactions.add", self._react)

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/"

    def rate_limit_next(self, method: str, *, retry_after: int = 1) -> None:
        self.fail_next(
            "POST",
            f"/api/{re.escape(method)}",
            lambda: Reply(
                429,
                {"ok": False, "error": "ratelimited"},
                {"Retry-After": str(retry_after), **_headers()},
            ),
        )

    def _args(self, req: RecordedRequest) -> dict[str, Any]:
        if req.headers.get("content-type", "").startswith("application/json"):
            data = req.json()
            return dict(data) if isinstance(data, dict) else {}
        return req.form()

    def _token(self, req: RecordedRequest, args: dict[str, Any]) -> str | None:
        auth = req.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:].strip()
        token = args.get("token")
        return str(token) if token else None

    def _check(self, req: RecordedRequest) -> tuple[dict[str, Any], Reply | None]:
        args = self._args(req)
        token = self._token(req, args)
        if not token:
            return args, _fail("not_authed")
        if token not in self.tokens:
            return args, _fail("invalid_auth")
        return args, None

    def _channel(self, raw: Any) -> str | None:
        name = str(raw or "")
        channel = self.names.get(name, name)
        return channel if channel in self.channels else None

    def _auth_test(self, req: RecordedRequest, m: re.Match[str]) -> Reply:
        _, err = self._check(req)
        if err is not None:
            return err
        return _ok(
            {
                "url": "https://charter-fake.slack.com/",
                "team": "charter",
                "user": "charter-bot",
                "team_id": "T0CHARTER",
                "user_id": "U0BOT",
                "bot_id": "B0BOT",
            },
            scopes="chat:write,reactions:write",
        )

    def _post(self, req: RecordedRequest, m: re.Match[str]) -> Reply:
        args, err = self._check(req)
        if err is not None:
            return err
        channel = self._channel(args.get("channel"))
        if channel is None:
            return _fail("channel_not_found")
        if channel not in self.member_of:
            return _fail("not_in_channel")
        if not args.get("text") and not args.get("blocks"):
            return _fail("no_text")
        ts = f"1764300000.{next(self._ts):06d}"
        message = {
            "channel": channel,
            "ts": ts,
            "text": args.get("text", ""),
            "thread_ts": args.get("thread_ts"),
        }
        self.messages.append(message)
        return _ok(
            {
                "channel": channel,
                "ts": ts,
                "message": {
                    "type": "message",
                    "text": message["text"],
                    "ts": ts,
                    "bot_id": "B0BOT",
                    **({"thread_ts": message["thread_ts"]} if message["thread_ts"] else {}),
                },
            }
        )

    def _react(self, req: RecordedRequest, m: re.Match[str]) -> Reply:
        args, err = self._check(req)
        if err is not None:
            return err
        channel = self._channel(args.get("channel"))
        if channel is None:
            return _fail("channel_not_found")
        ts = str(args.get("timestamp") or "")
        if not any(msg["channel"] == channel and msg["ts"] == ts for msg in self.messages):
            return _fail("message_not_found")
        name = str(args.get("name") or "")
        if any(r["ts"] == ts and r["name"] == name for r in self.reactions):
            return _fail("already_reacted")
        self.reactions.append({"channel": channel, "ts": ts, "name": name})
        return _ok({})


def _headers() -> dict[str, str]:
    return {"x-slack-req-id": secrets.token_hex(16)}


def _ok(body: dict[str, Any], *, scopes: str | None = None) -> Reply:
    headers = _headers()
    if scopes:
        headers["x-oauth-scopes"] = scopes
    return Reply(200, {"ok": True, **body}, headers)


def _fail(code: str) -> Reply:
    return Reply(200, {"ok": False, "error": code}, _headers())
