"""PagerDuty through PagerDuty's own ``pagerduty`` client.

REST API v2 (``PAGERDUTY_TOKEN``, ``Authorization: Token token=…``, a ``From`` user email):
read an incident (``read_only``, ``incident.read``), acknowledge (``incident.acknowledge``),
add a note (``incident.annotate``), resolve (``incident.resolve``). Events API v2
(``PAGERDUTY_ROUTING_KEY``): trigger an alert (``incident.trigger``). Writes are
``network``. PagerDuty's error bodies (``{"error": {"message", "code", "errors"}}``)
become typed errors; the request id (``x-request-id``) is in every result.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any

from charter.agent import Tool
from charter.policy import SideEffectLevel, ToolAnnotations

from ._calls import guard, preview
from ._redact import Redactor
from .errors import ConnectionFailed, IntegrationError, remote_error_class
from .settings import PagerDutySettings

SERVICE = "pagerduty"


class PagerDutyClient:
    def __init__(self, settings: PagerDutySettings, *, redactor: Redactor | None = None) -> None:
        self.settings = settings
        self.redactor = redactor or Redactor(settings.secrets())
        # one client each, kept: a new one loads the CA bundle again (~100 ms a call)
        self._clients: dict[str, Any] = {}

    def _verify(self) -> ssl.SSLContext | bool:
        if self.settings.ca_bundle:
            return ssl.create_default_context(cafile=self.settings.ca_bundle)
        return True

    def _rest(self) -> Any:
        from pagerduty import RestApiV2Client

        self.settings.require_rest()
        if "rest" in self._clients:
            return self._clients["rest"]
        assert self.settings.token is not None
        client = RestApiV2Client(
            self.settings.token,
            default_from=self.settings.from_email,
            base_url=self.settings.api_url.rstrip("/"),
            verify=self._verify(),
        )
        self._clients["rest"] = client
        return client

    def _events(self) -> Any:
        from pagerduty import EventsApiV2Client

        self.settings.require_events()
        if "events" in self._clients:
            return self._clients["events"]
        assert self.settings.routing_key is not None
        client = EventsApiV2Client(
            self.settings.routing_key,
            base_url=self.settings.events_url.rstrip("/"),
            verify=self._verify(),
        )
        self._clients["events"] = client
        return client

    def _send(self, client: Any, method: str, path: str, body: Any = None) -> dict[str, Any]:
        from pagerduty import Error

        try:
            kw = {"json": body} if body is not None else {}
            response = client.request(method, path, **kw)
        except Error as exc:
            response = getattr(exc, "response", None)
            if response is None:
                raise ConnectionFailed(SERVICE, str(exc)) from None
        except OSError as exc:
            raise ConnectionFailed(SERVICE, f"{type(exc).__name__}: {exc}") from None
        rid = response.headers.get("x-request-id")
        try:
            data = response.json() if response.content else {}
        except ValueError:
            data = {}
        if response.status_code >= 400:
            raise _error(response.status_code, data, rid)
        return {"request_id": rid, "data": data}

    # request builders: also the tools' previews

    @staticmethod
    def status_request(incident: str, status: str) -> dict[str, Any]:
        body = {"incident": {"type": "incident_reference", "status": status}}
        return {"method": "PUT", "path": f"/incidents/{incident}", "body": body}

    @staticmethod
    def note_request(incident: str, content: str) -> dict[str, Any]:
        return {
            "method": "POST",
            "path": f"/incidents/{incident}/notes",
            "body": {"note": {"content": content}},
        }

    @staticmethod
    def trigger_request(
        summary: str, source: str, severity: str = "error", dedup_key: str | None = None
    ) -> dict[str, Any]:
        if severity not in ("critical", "error", "warning", "info"):
            raise ValueError(f"severity {severity!r}: expected critical, error, warning or info")
        body: dict[str, Any] = {
            "event_action": "trigger",
            "payload": {"summary": summary, "source": source, "severity": severity},
        }
        if dedup_key:
            body["dedup_key"] = dedup_key
        return {"method": "POST", "path": "/v2/enqueue", "body": body}

    # operations

    def get_incident(self, incident: str) -> dict[str, Any]:
        got = self._send(self._rest(), "GET", f"/incidents/{incident}")
        inc = got["data"].get("incident") or {}
        return {
            "status": "ok",
            "request_id": got["request_id"],
            "id": inc.get("id"),
            "title": inc.get("title"),
            "incident_status": inc.get("status"),
            "urgency": inc.get("urgency"),
            "service": (inc.get("service") or {}).get("summary"),
            "html_url": inc.get("html_url"),
        }

    def abilities(self) -> list[str]:
        """The account's abilities (``GET /abilities``): a token check for any token."""
        got = self._send(self._rest(), "GET", "/abilities")
        return [str(a) for a in got["data"].get("abilities") or []]

    def _status(self, incident: str, status: str) -> dict[str, Any]:
        req = self.status_request(incident, status)
        got = self._send(self._rest(), req["method"], req["path"], req["body"])
        inc = got["data"].get("incident") or {}
        return {
            "status": "ok",
            "request_id": got["request_id"],
            "id": inc.get("id"),
            "incident_status": inc.get("status"),
        }

    def acknowledge(self, incident: str) -> dict[str, Any]:
        return self._status(incident, "acknowledged")

    def resolve(self, incident: str) -> dict[str, Any]:
        return self._status(incident, "resolved")

    def add_note(self, incident: str, content: str) -> dict[str, Any]:
        req = self.note_request(incident, content)
        got = self._send(self._rest(), req["method"], req["path"], req["body"])
        note = got["data"].get("note") or {}
        return {"status": "ok", "request_id": got["request_id"], "note_id": note.get("id")}

    def trigger(
        self, summary: str, source: str, severity: str = "error", dedup_key: str | None = None
    ) -> dict[str, Any]:
        req = self.trigger_request(summary, source, severity, dedup_key)
        client = self._events()
        body = dict(req["body"])
        got = self._send(client, req["method"], req["path"], body)
        return {
            "status": "ok",
            "request_id": got["request_id"],
            "dedup_key": got["data"].get("dedup_key"),
            "message": got["data"].get("message"),
        }


def _error(status: int, data: Any, rid: str | None) -> IntegrationError:
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):  # REST API v2
        message = str(error.get("message") or f"HTTP {status}")
        details = error.get("errors")
    elif isinstance(data, dict) and "message" in data:  # Events API v2
        message, details = str(data["message"]), data.get("errors")
    else:
        message, details = f"HTTP {status}", None
    return remote_error_class(status)(
        SERVICE, message, http_status=status, request_id=rid, details=details
    )




def _ann(level: SideEffectLevel, capability: str) -> ToolAnnotations:
    return ToolAnnotations(side_effect_level=level, kind="other", capabilities=(capability,))


def pagerduty_tools(client: PagerDutyClient) -> list[Tool]:
    """One tool per operation: get, acknowledge, add_note, resolve (REST), trigger (Events)."""
    s, r, net = client.settings, client.redactor, SideEffectLevel.NETWORK
    incident = {"incident": {"type": "string", "description": "the incident id (e.g. PT4KHLK)"}}

    def params(extra: dict[str, Any], required: list[str]) -> dict[str, Any]:
        return {"type": "object", "properties": {**incident, **extra}, "required": required}

    def ack_preview(a: Mapping[str, Any]) -> Any:
        return preview(
            lambda incident: client.status_request(incident, "acknowledged"), s.api_url
        )(a)

    def resolve_preview(a: Mapping[str, Any]) -> Any:
        return preview(lambda incident: client.status_request(incident, "resolved"), s.api_url)(a)

    return [
        Tool(
            "pagerduty_get_incident",
            guard(r, client.get_incident),
            "Read a PagerDuty incident: title, status, urgency, service.",
            params({}, ["incident"]),
            _ann(SideEffectLevel.READ_ONLY, "incident.read"),
        ),
        Tool(
            "pagerduty_acknowledge",
            guard(r, client.acknowledge),
            "Acknowledge a PagerDuty incident.",
            params({}, ["incident"]),
            _ann(net, "incident.acknowledge"),
            preview=ack_preview,
        ),
        Tool(
            "pagerduty_add_note",
            guard(r, client.add_note),
            "Add a note to a PagerDuty incident's timeline.",
            params({"content": {"type": "string"}}, ["incident", "content"]),
            _ann(net, "incident.annotate"),
            preview=preview(client.note_request, s.api_url),
        ),
        Tool(
            "pagerduty_resolve",
            guard(r, client.resolve),
            "Resolve a PagerDuty incident.",
            params({}, ["incident"]),
            _ann(net, "incident.resolve"),
            preview=resolve_preview,
        ),
        Tool(
            "pagerduty_trigger",
            guard(r, client.trigger),
            "Trigger an alert through the Events API v2 (opens or updates an incident).",
            {
                "type": "object",
                "required": ["summary", "source"],
                "properties": {
                    "summary": {"type": "string"},
                    "source": {"type": "string"},
                    "severity": {"enum": ["critical", "error", "warning", "info"]},
                    "dedup_key": {"type": "string"},
                },
            },
            _ann(net, "incident.trigger"),
            preview=preview(client.trigger_request, s.events_url),
        ),
    ]


__all__ = ["PagerDutyClient", "pagerduty_tools"]
