"""A fake PagerDuty on 127.0.0.1 over HTTPS (PagerDuty's client accepts only https).

REST API v2 (``Authorization: Token token=…``; writes need a ``From`` header naming a
user): ``GET /incidents/{id}``, ``PUT /incidents/{id}`` (``{"incident": {"type":
"incident_reference", "status": "acknowledged"|"resolved"}}``), ``POST
/incidents/{id}/notes``; errors as ``{"error": {"message", "code", "errors"}}`` (2100 not
found, 2001 invalid input, 2006/2007 auth). Events API v2: ``POST /v2/enqueue`` with a
``routing_key`` answers 202 ``{"status": "success", "dedup_key"}`` or 400 ``{"status":
"invalid event", "errors"}``. Every answer has ``x-request-id``. Trust :attr:`ca_file`
(``CHARTER_CA_BUNDLE``) and point ``PAGERDUTY_API_URL`` / ``PAGERDUTY_EVENTS_URL`` at
:attr:`url`. :attr:`incidents`, :attr:`notes` and :attr:`events` are the state.
"""

from __future__ import annotations

import itertools
import re
import secrets
from collections.abc import Sequence
from typing import Any

from ._server import FakeServer, RecordedRequest, Reply


class FakePagerDuty(FakeServer):
    service = "pagerduty"

    def __init__(
        self,
        *,
        tokens: Sequence[str] = ("u+charter-fake-token",),
        routing_keys: Sequence[str] = ("R0CHARTERFAKEROUTINGKEY00000000",),
        users: Sequence[str] = ("oncall-bot@example.com",),
    ) -> None:
        super().__init__(tls=True)
        self.tokens = set(tokens)
        self.routing_keys = set(routing_keys)
        self.users = set(users)
        self.incidents: dict[str, dict[str, Any]] = {}
        self.notes: dict[str, list[dict[str, Any]]] = {}
        self.events: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self.route("GET", "/users/me", self._me)
        self.route("GET", "/abilities", self._abilities)
        self.route("GET", r"/incidents/(?P<id>[A-Za-z0-9-]+)", self._get)
        self.route("PUT", r"/incidents/(?P<id>[A-Za-z0-9-]+)", self._put)
        self.route("POST", r"/incidents/(?P<id>[A-Za-z0-9-]+)/notes", self._note)
        self.route("POST", "/v2/enqueue", self._enqueue)

    def add_incident(
        self, incident_id: str, title: str, *, service: str = "checkout", urgency: str = "high"
    ) -> dict[str, Any]:
        incident = {
            "id": incident_id,
            "type": "incident",
            "title": title,
            "summary": f"[#{incident_id}] {title}",
            "status": "triggered",
            "urgency": urgency,
            "incident_key": secrets.token_hex(8),
            "service": {"id": "PSVC001", "type": "service_reference", "summary": service},
            "html_url": f"https://charter-fake.pagerduty.com/incidents/{incident_id}",
        }
        self.incidents[incident_id] = incident
        return incident

    def _auth(self, req: RecordedRequest) -> Reply | None:
        value = req.headers.get("authorization", "")
        m = re.match(r"(?i)^token token=(.+)$", value.strip())
        if not m:
            return _error(401, 2006, "Authentication failed: no API token")
        if m.group(1) not in self.tokens:
            return _error(401, 2006, "Invalid Credentials")
        return None

    def _writer(self, req: RecordedRequest) -> Reply | None:
        sender = req.headers.get("from", "")
        if not sender:
            return _error(
                400,
                2001,
                "Invalid Input Provided",
                [
                    'You must specify a user\'s email address in the "From" header '
                    "to perform this action"
                ],
            )
        if sender not in self.users:
            return _error(
                400,
                2001,
                "Invalid Input Provided",
                ['The email address specified in the "From" header is not a valid user'],
            )
        return None

    def _me(self, req: RecordedRequest, m: re.Match[str]) -> Reply:
        err = self._auth(req)
        if err is not None:
            return err
        return _ok({"user": {"id": "PUSER01", "email": sorted(self.users)[0], "type": "user"}})

    def _abilities(self, req: RecordedRequest, m: re.Match[str]) -> Reply:
        err = self._auth(req)
        if err is not None:
            return err
        return _ok({"abilities": ["teams", "read_only_users", "urgencies"]})

    def _incident(self, m: re.Match[str]) -> dict[str, Any] | Reply:
        incident = self.incidents.get(m["id"])
        if incident is None:
            return _error(404, 2100, "Not Found", ["Incident Not Found"])
        return incident

    def _get(self, req: RecordedRequest, m: re.Match[str]) -> Reply:
        err = self._auth(req)
        if err is not None:
            return err
        incident = self._incident(m)
        if isinstance(incident, Reply):
            return incident
        return _ok({"incident": incident})

    def _put(self, req: RecordedRequest, m: re.Match[str]) -> Reply:
        err = self._auth(req) or self._writer(req)
        if err is not None:
            return err
        incident = self._incident(m)
        if isinstance(incident, Reply):
            return incident
        body = (req.json() or {}).get("incident") or {}
        status = body.get("status")
        if body.get("type") not in ("incident", "incident_reference") or status not in (
            "acknowledged",
            "resolved",
        ):
            return _error(
                400,
                2001,
                "Invalid Input Provided",
                ["Incident status must be acknowledged or resolved"],
            )
        if incident["status"] == "resolved":
            return _error(400, 2001, "Invalid Input Provided", ["Incident Already Resolved"])
        incident["status"] = status
        return _ok({"incident": incident})

    def _note(self, req: RecordedRequest, m: re.Match[str]) -> Reply:
        err = self._auth(req) or self._writer(req)
        if err is not None:
            return err
        incident = self._incident(m)
        if isinstance(incident, Reply):
            return incident
        content = ((req.json() or {}).get("note") or {}).get("content")
        if not content:
            return _error(400, 2001, "Invalid Input Provided", ["Note content can't be blank"])
        note = {
            "id": f"PNOTE{next(self._ids):03d}",
            "content": content,
            "user": {"summary": req.headers.get("from"), "type": "user_reference"},
        }
        self.notes.setdefault(m["id"], []).append(note)
        return _ok({"note": note}, status=201)

    def _enqueue(self, req: RecordedRequest, m: re.Match[str]) -> Reply:
        try:
            event = req.json() or {}
        except ValueError:
            return _event_error(["Event object is invalid: not JSON"])
        if event.get("routing_key") not in self.routing_keys:
            return _event_error(["'routing_key' is invalid"])
        action = event.get("event_action")
        if action not in ("trigger", "acknowledge", "resolve"):
            return _event_error(["'event_action' is invalid"])
        payload = event.get("payload") or {}
        if action == "trigger":
            missing = [k for k in ("summary", "source", "severity") if not payload.get(k)]
            if missing:
                return _event_error([f"'payload.{k}' is missing or blank" for k in missing])
        dedup = event.get("dedup_key") or secrets.token_hex(16)
        self.events.append({**event, "dedup_key": dedup})
        return Reply(
            202, {"status": "success", "message": "Event processed", "dedup_key": dedup}, _headers()
        )


def _headers() -> dict[str, str]:
    return {"x-request-id": secrets.token_hex(12)}


def _ok(body: Any, *, status: int = 200) -> Reply:
    return Reply(status, body, _headers())


def _error(status: int, code: int, message: str, errors: list[str] | None = None) -> Reply:
    return Reply(
        status, {"error": {"message": message, "code": code, "errors": errors or []}}, _headers()
    )


def _event_error(errors: list[str]) -> Reply:
    return Reply(
        400,
        {"status": "invalid event", "message": "Event object is invalid", "errors": errors},
        _headers(),
    )
