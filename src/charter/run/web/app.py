"""The ASGI app ``charter serve`` and ``charter console`` serve (Starlette on uvicorn).

Routes: ``POST /hooks/{provider}`` (HMAC, a thin call into :class:`~charter.run.serve.Server`),
``/status``, ``/healthz``, ``/readyz`` (reads the database), ``/metrics``, and the
console: ``/console`` (fleet), ``/console/personas/{name}`` (charter, charts, recent runs,
pause/resume/promote), ``/console/runs/{id}`` (timeline, transcript, receipts),
``/console/approvals``, ``/console/inbox``, ``/console/feed`` (Server-Sent Events with
``supervision tail``'s cursor), their JSON under ``/api/...`` (the series the charts draw),
and ``POST /console/approvals/{run}/{call}`` (approve or deny).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote_plus

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from charter.runtime import (
    LIFECYCLE_STATES,
    EventLogError,
    follow,
    open_event_log,
    to_ndjson,
)

from ..errors import ApprovalError
from ..session import RunOptions
from . import charts, fleet_rows
from .access import COOKIE, Access, is_loopback
from .data import WINDOWS, ConsoleData
from .metrics import Metrics

HERE = Path(__file__).parent
OPEN_PATHS = ("/healthz", "/readyz", "/hooks/", "/static/", "/console/login")


def _templates() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html"])
    )
    env.filters["tojson_pretty"] = lambda v: json.dumps(v, indent=2, sort_keys=True, default=str)
    env.filters["tojson_compact"] = lambda v: json.dumps(v, separators=(",", ":"), default=str)
    env.globals["charts"] = charts
    env.globals["render_policy"] = _render_policy
    env.globals["ago"] = fleet_rows.ago
    env.globals["fleet_row"] = fleet_rows.row
    return env


def _render_policy(view: dict[str, Any]) -> str:
    from charter.policy import render_effective

    return render_effective(view)


def build_app(
    options: RunOptions, *, access: Access, server: Any = None, title: str = "charter"
) -> Starlette:
    """The app; ``server`` (a :class:`~charter.run.serve.Server`) adds webhooks and queue size."""
    clock = options.clock()
    data = ConsoleData(options, clock=clock)
    metrics = server.metrics if server is not None else Metrics()
    templates = _templates()

    def page(request: Request, name: str, **context: Any) -> HTMLResponse:
        who = request.state.identity
        html = templates.get_template(name).render(
            title=title,
            who=who,
            csrf=access.csrf_token(who),
            open=access.open,
            now=clock(),
            **context,
        )
        return HTMLResponse(html, headers={"Cache-Control": "no-store"})

    # -- probes, status, metrics, webhooks ------------------------------------------

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def readyz(request: Request) -> Response:
        try:
            info = await run_in_threadpool(data.ready)
        except EventLogError as exc:
            return JSONResponse({"ready": False, "error": str(exc)}, status_code=503)
        if server is not None and server.stopping.is_set():
            return JSONResponse({**info, "ready": False, "error": "shutting down"}, 503)
        return JSONResponse(info)

    async def status(request: Request) -> Response:
        if server is not None:
            return JSONResponse(await run_in_threadpool(server.status))
        fleet = await run_in_threadpool(data.fleet)
        return JSONResponse(
            {"at": fleet["at"], "personas": {p["name"]: p for p in fleet["personas"]}}
        )

    def _metrics() -> bytes:
        with data.log() as log:
            return metrics.render(log)

    async def metrics_view(request: Request) -> Response:
        body = await run_in_threadpool(_metrics)
        return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")

    async def hook(request: Request) -> Response:
        if server is None:
            return JSONResponse({"error": "webhooks are served by charter serve"}, 404)
        # the size limit before the body is read whole (a 60 MB body was read and kept)
        limit = int(getattr(server, "max_body_bytes", 0)) or None
        declared = request.headers.get("content-length", "")
        if limit is not None and declared.isdigit() and int(declared) > limit:
            return JSONResponse({"error": f"body over {limit} bytes"}, 413)
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if limit is not None and size > limit:
                return JSONResponse({"error": f"body over {limit} bytes"}, 413)
            chunks.append(chunk)
        body = b"".join(chunks)
        code, out = await run_in_threadpool(
            server.accept_webhook, request.path_params["provider"], body, request.headers
        )
        return JSONResponse(out, status_code=code)

    # -- console ---------------------------------------------------------------------

    async def fleet_page(request: Request) -> Response:
        names = request.query_params.getlist("persona") or None
        fleet = await run_in_threadpool(data.fleet, names)
        wanted = request.query_params.get("state") or ""
        rows = [p for p in fleet["personas"] if not wanted or p["lifecycle"] == wanted]
        if server is not None:
            fleet["queued_jobs"] = server.jobs.qsize()
        return page(request, "fleet.html", fleet=fleet, rows=rows, wanted=wanted,
                    states=LIFECYCLE_STATES)  # fmt: skip

    async def fleet_api(request: Request) -> Response:
        return JSONResponse(await run_in_threadpool(data.fleet))

    async def run_page(request: Request) -> Response:
        run = await run_in_threadpool(data.run, request.path_params["run_id"])
        if run is None:
            return PlainTextResponse("no such run", 404)
        return page(request, "run.html", run=run)

    async def run_api(request: Request) -> Response:
        run = await run_in_threadpool(data.run, request.path_params["run_id"])
        if run is None:
            return JSONResponse({"error": "no such run"}, 404)
        return JSONResponse(run)

    async def persona_page(request: Request) -> Response:
        window = request.query_params.get("window") or "24h"
        if window not in WINDOWS:
            return PlainTextResponse(f"window: expected one of {', '.join(WINDOWS)}", 400)
        found = await run_in_threadpool(data.persona, request.path_params["name"], window)
        if found is None:
            return PlainTextResponse("no such persona", 404)
        return page(request, "persona.html", p=found, windows=list(WINDOWS), window=window,
                    done=request.query_params.get("done"),
                    error=request.query_params.get("error"))  # fmt: skip

    async def persona_api(request: Request) -> Response:
        window = request.query_params.get("window") or "24h"
        if window not in WINDOWS:
            return JSONResponse({"error": f"window: expected one of {', '.join(WINDOWS)}"}, 400)
        found = await run_in_threadpool(data.persona, request.path_params["name"], window)
        if found is None:
            return JSONResponse({"error": "no such persona"}, 404)
        return JSONResponse(found)

    async def control(request: Request) -> Response:
        """Pause, resume or promote a persona (CSRF; recorded as the token's name)."""
        from ..promotion import PromotionError

        form = {k: v[0] for k, v in parse_qs((await request.body()).decode()).items()}
        who = request.state.identity
        wants_json = "application/json" in request.headers.get("accept", "")
        if not access.csrf_ok(who, form.get("csrf") or request.headers.get("x-csrf-token")):
            return JSONResponse({"error": "missing or bad CSRF token"}, 403)
        name = request.path_params["name"]
        action = form.get("action") or ""
        back = f"/console/personas/{quote_plus(name)}"
        try:
            entry = await run_in_threadpool(
                lambda: data.control(name, action, by=f"console:{who}", to=form.get("to"))
            )
        except KeyError:
            return JSONResponse({"error": f"no such persona {name!r}"}, 404)
        except (ValueError, PromotionError) as exc:
            if wants_json:
                return JSONResponse({"error": str(exc)}, 409)
            return RedirectResponse(f"{back}?error={quote_plus(str(exc))}", 303)
        if wants_json:
            return JSONResponse(entry)
        said = entry.get("message") or ("done" if entry.get("changed", True) else "no change")
        done = quote_plus(f"{action}: {said} (recorded as console:{who})")
        return RedirectResponse(f"{back}?done={done}", 303)

    async def approvals_page(request: Request) -> Response:
        pending = await run_in_threadpool(data.approvals)
        return page(request, "approvals.html", pending=pending,
                    done=request.query_params.get("done"),
                    error=request.query_params.get("error"))  # fmt: skip

    async def approvals_api(request: Request) -> Response:
        return JSONResponse(await run_in_threadpool(data.approvals))

    async def decide(request: Request) -> Response:
        form = {k: v[0] for k, v in parse_qs((await request.body()).decode()).items()}
        who = request.state.identity
        if not access.csrf_ok(who, form.get("csrf") or request.headers.get("x-csrf-token")):
            return JSONResponse({"error": "missing or bad CSRF token"}, 403)
        verdict = form.get("decision")
        if verdict not in ("approve", "deny"):
            return JSONResponse({"error": "decision must be approve or deny"}, 400)
        try:
            entry = await run_in_threadpool(
                lambda: data.decide(
                    request.path_params["run_id"],
                    request.path_params["call_id"],
                    granted=verdict == "approve",
                    by=f"console:{who}",
                    reason=(form.get("reason") or "").strip() or None,
                )
            )
        except ApprovalError as exc:
            if "application/json" in request.headers.get("accept", ""):
                return JSONResponse({"error": str(exc)}, 409)
            return RedirectResponse(f"/console/approvals?error={quote_plus(str(exc))}", 303)
        if "application/json" in request.headers.get("accept", ""):
            return JSONResponse(entry)
        done = quote_plus(f"{entry['status']} {entry['approval_id']}")
        return RedirectResponse(f"/console/approvals?done={done}", 303)

    async def inbox_page(request: Request) -> Response:
        items = await run_in_threadpool(data.inbox)
        return page(request, "inbox.html", items=items,
                    done=request.query_params.get("done"),
                    error=request.query_params.get("error"))  # fmt: skip

    async def inbox_api(request: Request) -> Response:
        return JSONResponse(await run_in_threadpool(data.inbox))

    async def acknowledge(request: Request) -> Response:
        from charter.runtime.inbox import InboxError

        form = {k: v[0] for k, v in parse_qs((await request.body()).decode()).items()}
        who = request.state.identity
        if not access.csrf_ok(who, form.get("csrf") or request.headers.get("x-csrf-token")):
            return JSONResponse({"error": "missing or bad CSRF token"}, 403)
        item_id = request.path_params["item_id"]
        wants_json = "application/json" in request.headers.get("accept", "")
        try:
            entry = await run_in_threadpool(
                lambda: data.acknowledge(
                    item_id, by=f"console:{who}", note=(form.get("note") or "").strip() or None
                )
            )
        except InboxError as exc:
            if wants_json:
                return JSONResponse({"error": str(exc)}, 409)
            return RedirectResponse(f"/console/inbox?error={quote_plus(str(exc))}", 303)
        if wants_json:
            return JSONResponse(entry)
        return RedirectResponse(f"/console/inbox?done={quote_plus('acknowledged ' + item_id)}", 303)

    async def feed(request: Request) -> Response:
        """SSE: frames after ``Last-Event-ID`` or ``?since=`` (strictly), then live ones."""
        since = request.headers.get("last-event-id") or request.query_params.get("since") or "0"
        persona = request.query_params.get("persona") or None
        try:
            cursor = max(0, int(since))
        except ValueError:
            return JSONResponse({"error": f"since: expected an event id, got {since!r}"}, 400)
        loop = asyncio.get_running_loop()
        frames: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        stop = threading.Event()

        def pump() -> None:
            log = open_event_log(
                state_dir=options.state_dir, url=options.state_url, env=options.env
            )
            try:
                for frame in follow(log, persona=persona, since_event_id=cursor,
                                    wait_slice=0.05, should_stop=stop.is_set):  # fmt: skip
                    loop.call_soon_threadsafe(frames.put_nowait, frame)
                    if stop.is_set():
                        break
            finally:
                log.close()
                loop.call_soon_threadsafe(frames.put_nowait, None)

        threading.Thread(target=pump, name="charter-console-feed", daemon=True).start()

        async def stream() -> Any:
            try:
                yield ": charter supervision feed\n\n"
                while True:
                    try:
                        frame = await asyncio.wait_for(frames.get(), timeout=15)
                    except TimeoutError:
                        yield ": keep-alive\n\n"
                        continue
                    if frame is None:
                        return
                    yield f"id: {frame['event_id']}\nevent: frame\ndata: {to_ndjson(frame)}\n\n"
            finally:
                stop.set()

        return StreamingResponse(
            stream(), media_type="text/event-stream", headers={"Cache-Control": "no-store"}
        )

    async def login_page(request: Request) -> Response:
        html = templates.get_template("login.html").render(title=title, error=None)
        return HTMLResponse(html)

    async def login(request: Request) -> Response:
        form = {k: v[0] for k, v in parse_qs((await request.body()).decode()).items()}
        token = form.get("token", "")
        if access.identify(None, token) is None or access.open:
            html = templates.get_template("login.html").render(title=title, error="unknown token")
            return HTMLResponse(html, 401)
        response = RedirectResponse("/console", 303)
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
        return response

    async def root(request: Request) -> Response:
        return RedirectResponse("/console", 307)

    routes = [
        Route("/", root),
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        Route("/status", status),
        Route("/metrics", metrics_view),
        Route("/hooks/{provider}", hook, methods=["POST"]),
        Route("/console", fleet_page),
        Route("/console/login", login_page),
        Route("/console/login", login, methods=["POST"]),
        Route("/console/runs/{run_id}", run_page),
        Route("/console/personas/{name}", persona_page),
        Route("/console/personas/{name}/control", control, methods=["POST"]),
        Route("/api/personas/{name}", persona_api),
        Route("/api/personas/{name}/control", control, methods=["POST"]),
        Route("/console/approvals", approvals_page),
        Route("/console/approvals/{run_id}/{call_id}", decide, methods=["POST"]),
        Route("/console/feed", feed),
        Route("/console/inbox", inbox_page),
        Route("/console/inbox/{item_id}/ack", acknowledge, methods=["POST"]),
        Route("/api/inbox", inbox_api),
        Route("/api/inbox/{item_id}/ack", acknowledge, methods=["POST"]),
        Route("/api/fleet", fleet_api),
        Route("/api/runs/{run_id}", run_api),
        Route("/api/approvals", approvals_api),
        Route("/api/approvals/{run_id}/{call_id}", decide, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    return Starlette(routes=routes, middleware=[Middleware(AccessGate, access=access)])


class AccessGate:
    """ASGI middleware: the loopback-Host rule of open access, then the token check.

    Sets ``request.state.identity``; refuses with 403 (open access from a non-loopback
    ``Host``) or 401 (no valid token) before any route runs, so nothing changes.
    """

    def __init__(self, app: ASGIApp, *, access: Access) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        path = scope["path"]
        if self.access.open and not path.startswith("/hooks/") and not _loopback_host(request):
            # open access is for this machine only: a page on another origin that rebinds
            # its DNS name to 127.0.0.1 must not read the console or its CSRF token
            refused = JSONResponse({"error": "open console: loopback Host only"}, 403)
            await refused(scope, receive, send)
            return
        header = request.headers.get("authorization", "")
        bearer = header[7:].strip() if header.lower().startswith("bearer ") else None
        who = self.access.identify(bearer, request.cookies.get(COOKIE))
        if who is None and not path.startswith(OPEN_PATHS):
            response: Response
            wants_html = "text/html" in request.headers.get("accept", "")
            if wants_html and request.method == "GET" and path.startswith("/console"):
                response = HTMLResponse(
                    "<!doctype html><title>401</title><p>A token is required. "
                    '<a href="/console/login">Sign in</a></p>',
                    401,
                )
            else:
                response = JSONResponse({"error": "a valid token is required"}, 401)
            response.headers["WWW-Authenticate"] = "Bearer"
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})["identity"] = who
        await self.app(scope, receive, send)


def _loopback_host(request: Request) -> bool:
    """Whether the ``Host`` header names a loopback address (``[::1]:port`` included)."""
    host = request.headers.get("host", "")
    name = host[1:].partition("]")[0] if host.startswith("[") else host.partition(":")[0]
    return is_loopback(name)


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket (bound now, so ``--port 0`` knows its port before serving)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def http_server(app: Starlette, sock: socket.socket) -> Any:
    """A uvicorn server for ``app`` on ``sock`` (run it with ``.run(sockets=[sock])``)."""
    import uvicorn

    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                            timeout_graceful_shutdown=2)  # fmt: skip
    return uvicorn.Server(config)


__all__ = ["bind_socket", "build_app", "http_server"]
