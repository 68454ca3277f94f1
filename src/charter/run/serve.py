"""``charter serve``: a small supervisor on the embedded defaults.

- **Schedules**: each persona's cron schedules fire at their scheduled minute (the work
  key is ``schedule:<persona>:<minute>``, not the wall-clock time, so there is no drift).
  The last fired minute is read back from the event log, so a restart never fires a
  minute twice; minutes missed while down are caught up once (the latest occurrence
  only, within ``CATCH_UP``). A persona that never fired starts with the current minute.
- **Webhooks** on ``POST /hooks/{provider}``: a body over ``max_body_bytes`` (25 MB,
  GitHub's own cap) is a 413; the sender's signature is verified with
  ``CHARTER_WEBHOOK_SECRET_<PROVIDER>`` (or ``--secret``), and without a secret for the
  provider the webhook is refused (401) unless serve was started with
  ``--insecure-accept-unsigned PROVIDER``; a bad or missing signature is a 401. Nothing
  is recorded for a refused request. The payload is normalised to a work key and
  offered, with the sender's delivery id (a redelivery is refused by it), to every
  persona that declares the trigger's event and action. It is recorded in the log
  before the 202, which names the personas that took the work and those that refused
  it; webhooks arriving while the accept thread is busy are recorded together in its
  next transaction (group commit), and a failed transaction answers each of them 503.
- **Handoffs**: persona inboxes are run after every job.
- ``GET /status``: every persona's status as JSON; ``/healthz``, ``/readyz``, ``/metrics``
  and the supervision console (``/console``) are served by the same ASGI app
  (:mod:`charter.run.web`, Starlette on uvicorn).
- Graceful shutdown on SIGINT/SIGTERM: no new work is accepted; the job in flight finishes.

Runs happen on ``--workers`` worker threads, each with its own state store connection;
webhooks are recorded by one accept thread with its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
import hmac
import json
import os
import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from cronsim import CronSim

from charter.manifest.cron import expand
from charter.runtime import (
    EventLogError,
    Kind,
    PersonaRuntime,
    PersonaRuntimeError,
    ReceiptStatus,
    RunReceipt,
    StateCache,
    TriggerError,
    WorkItem,
    declares_trigger,
    delivery_id,
    format_time,
    github_kind,
    linear_kind,
    normalize_trigger,
    open_event_log,
    parse_time,
    slack_kind,
)
from charter.runtime.clock import utc_now

from . import promotion
from .engine import (
    RunResult,
    drain_in_session,
    resume_parked_in_session,
    run_handoff_in_session,
    run_in_session,
)
from .errors import RunError
from .events import APPROVAL_RESOLUTIONS
from .outcomes import outcome_from_trigger
from .session import RunOptions, Session, open_session, runtime_specs

#: the events serve's watcher wakes a worker for: queued work, decided approvals
WAKE_KINDS = frozenset({Kind.WORK_QUEUED, *APPROVAL_RESOLUTIONS})
#: event ids of this replica's own queued webhooks kept for its watcher to skip, at most
OWN_QUEUED_MAX = 10_000
#: how long a replica waits before looking at work another replica queued (see watch)
REMOTE_WAKE_DELAY_S = 0.025
#: the primary worker's tick (parked runs, queues, handoffs) at most this often between
#: jobs; a due schedule ticks at once
TICK_EVERY_S = 0.5

CATCH_UP = timedelta(hours=24)
FIRST_GRACE = timedelta(seconds=60)
SECRET_ENV = "CHARTER_WEBHOOK_SECRET_{}"
#: the largest webhook body accepted (GitHub caps its payloads at 25 MB)
MAX_BODY_BYTES = 25 * 1024 * 1024
#: receipts that mean a persona took the work (ran, runs, waits, or joined a named run)
ACCEPTED = frozenset(
    {ReceiptStatus.QUEUED, ReceiptStatus.STARTED, ReceiptStatus.COMPLETED, ReceiptStatus.LEASE_BUSY}
)
#: Reconnect backoff after the state store went away (seconds, doubling).
BACKOFF_START = 0.5
BACKOFF_MAX = 10.0


def store_error(exc: BaseException) -> bool:
    """Is ``exc`` the state store being unreachable (retry), not a bug (crash)?"""
    import sqlite3

    if isinstance(exc, (EventLogError, sqlite3.OperationalError)):
        return True
    module = type(exc).__module__
    return module.startswith("psycopg") and type(exc).__name__ in (
        "OperationalError",
        "InterfaceError",
        "AdminShutdown",
        "ConnectionTimeout",
        # the server ended a session left idle in a transaction (a partition, a pause):
        # reconnect (charter.runtime.postgres_log sets the timeout)
        "IdleInTransactionSessionTimeout",
    )


def _quiet(_line: str) -> None:
    pass


#: A worker job: an approval was decided somewhere; take up parked runs now.
PARKED = "\x00parked"
_MINUTE = "%Y-%m-%dT%H:%MZ"


def schedule_key(name: str, minute: datetime) -> str:
    return f"schedule:{name}:{minute.strftime(_MINUTE)}"


def last_fired(session: Session, name: str) -> datetime | None:
    """The latest schedule minute recorded for ``name`` (any outcome), from the log."""
    prefix = f"schedule:{name}:"
    latest: datetime | None = None
    for event in session.log.iter_all(persona=name):
        key = event.payload.get("work_key")
        if isinstance(key, str) and key.startswith(prefix):
            minute = parse_time(key.removeprefix(prefix).replace("Z", ":00Z"))
            if latest is None or minute > latest:
                latest = minute
    return latest


def due_minute(
    schedules: tuple[str, ...], now: datetime, after: datetime | None
) -> datetime | None:
    """The latest occurrence at or before ``now`` that is after ``after`` (and recent)."""
    start = now.replace(second=0, microsecond=0) + timedelta(seconds=1)
    best: datetime | None = None
    for expr in schedules:
        try:
            occurrence = next(CronSim(expand(expr), start, reverse=True))
        except StopIteration:
            continue
        if best is None or occurrence > best:
            best = occurrence
    if best is None:
        return None
    if after is None:  # never fired: only an occurrence of this very minute (or the last)
        return best if best >= now - FIRST_GRACE else None
    if best <= after or best < now - CATCH_UP:
        return None
    return best


def verify_signature(secret: str | None, body: bytes, header: str | None) -> bool:
    """GitHub's ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>``."""
    if not secret:
        return True
    if not header or not header.startswith("sha256="):
        return False
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, header.removeprefix("sha256="))


#: Slack refuses requests older than this (replay protection); so does charter.
SLACK_MAX_AGE = 300


def verify_webhook(
    provider: str, secret: str | None, body: bytes, headers: Mapping[str, str], now: float
) -> bool:
    """Each sender's own signature scheme (no secret configured: accepted as is).

    GitHub (and any other provider): ``X-Hub-Signature-256: sha256=<hex HMAC>``.
    Linear: ``Linear-Signature: <hex HMAC-SHA256 of the body>``. Slack: ``X-Slack-
    Signature: v0=<hex HMAC of "v0:<X-Slack-Request-Timestamp>:<body>">`` with the
    timestamp within five minutes of ``now``.
    """
    if not secret:
        return True
    if provider == "linear":
        header = headers.get("linear-signature") or ""
        expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        return bool(header) and hmac.compare_digest(expected, header)
    if provider == "slack":
        stamp = headers.get("x-slack-request-timestamp") or ""
        header = headers.get("x-slack-signature") or ""
        if not stamp.isdigit() or abs(now - int(stamp)) > SLACK_MAX_AGE:
            return False
        base = b"v0:" + stamp.encode() + b":" + body
        expected = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
        return bool(header) and hmac.compare_digest(expected, header)
    return verify_signature(secret, body, headers.get("x-hub-signature-256"))


def webhook_kind(provider: str, event: str | None, payload: Mapping[str, Any]) -> str | None:
    """The trigger kind of a webhook: GitHub's event header refined by ``action``,
    Linear's ``type``/``action``, Slack's event type."""
    if provider == "github":
        return github_kind(event, payload)
    if provider == "linear":
        return linear_kind(payload)
    if provider == "slack":
        return slack_kind(payload)
    return None


@dataclass(frozen=True, eq=False)  # compared by identity
class _Pending:
    """A verified webhook waiting for the accept thread, and its answer."""

    names: list[str]
    provider: str
    kind: str | None
    payload: dict[str, Any]
    delivery: str | None = None
    done: Future[list[RunReceipt]] = dataclasses.field(default_factory=Future)


@dataclass(frozen=True)
class WebhookJob:
    persona: str
    provider: str
    kind: str | None
    payload: dict[str, Any]
    metadata: dict[str, str]


class Supervisor:
    """Schedules, webhook jobs and handoff delivery over one session (one thread)."""

    def __init__(self, session: Session, *, log_line: Callable[[str], None] = print) -> None:
        self.session = session
        self.log_line = log_line
        #: called with a persona's name when a drain leaves work another worker can start
        self.more: Callable[[str], None] | None = None
        #: true once the replica shuts down: start no more work (it stays for others)
        self.stopping: Callable[[], bool] = lambda: False
        #: personas whose entry workflow is for another host (harn): valid, never run here
        self.foreign = foreign_personas(session.manifest)
        self.fired: dict[str, datetime | None] = {
            p.name: last_fired(session, p.name)
            for p in session.manifest.personas
            if p.schedules and p.name not in self.foreign
        }
        for name, errors in session.invalid.items():
            first = errors[0]
            more = f" (+{len(errors) - 1} more; charter persona check)" if len(errors) > 1 else ""
            self.log_line(f"persona {name} left out, it does not validate: {first}{more}")
        for name, message in self.foreign.items():
            self.log_line(f"persona {name} left out: {message}")

    def _say(self, what: str, result: RunResult | None = None) -> None:
        at = format_time(self.session.options.clock()())
        tail = ""
        if result is not None:
            tail = f" -> {result.status}" + (f" {result.run_id}" if result.run_id else "")
            if result.error and result.status != "completed":
                tail += f" ({result.error})"
        self.log_line(f"{at} {what}{tail}")

    def tick(self, now: datetime) -> list[RunResult]:
        """Fire every schedule that is due at ``now``, then deliver handoffs."""
        results: list[RunResult] = []
        for persona in self.session.manifest.personas:
            if not persona.schedules or persona.name in self.foreign:
                continue
            minute = due_minute(persona.schedules, now, self.fired.get(persona.name))
            if minute is None:
                continue
            self.fired[persona.name] = minute
            key = schedule_key(persona.name, minute)
            result = run_in_session(self.session, persona.name, schedule=True, work_key=key)
            self._say(f"schedule {persona.name} {key}", result)
            results.append(result)
        results.extend(self.resume_parked())
        results.extend(self.drain())
        results.extend(self.deliver())
        return results

    def resume_parked(self) -> list[RunResult]:
        """Take up parked runs whose approval was decided (from any process or host)."""
        results: list[RunResult] = []
        for persona in self.session.manifest.personas:
            if (
                self.stopping()
                or persona.name in self.foreign
                or not self.session.runtime.state(persona.name).parked
            ):
                continue
            for result in resume_parked_in_session(self.session, persona.name):
                self._say(f"resumed -> {persona.name} {result.work_key}", result)
                results.append(result)
        return results

    def drain(self) -> list[RunResult]:
        """Run queued work (accepted webhooks, work that waited at ``max_concurrency``)."""
        results: list[RunResult] = []
        for persona in self.session.manifest.personas:
            if not self.stopping():
                results.extend(self.drain_persona(persona.name))
        return results

    def take(self, job: str | WebhookJob) -> None:
        """A worker's job: a persona whose queue has accepted work, decided approvals
        (:data:`PARKED`), or an outcome."""
        if job == PARKED:
            self.resume_parked()
        elif isinstance(job, str):
            if self.session.runtime.personas.get(job) is not None:
                self.drain_persona(job)
        else:
            self.run_webhook(job, deliver=False)

    def drain_persona(self, name: str) -> list[RunResult]:
        if name in self.foreign:  # work queued for it (persona trigger) stays queued
            return []
        results = drain_in_session(self.session, name, more=self.more, stop=self.stopping)
        for result in results:
            self._say(f"run {name} {result.work_key}", result)
        return results

    def next_due(self, now: datetime) -> datetime | None:
        soonest: datetime | None = None
        for persona in self.session.manifest.personas:
            for expr in persona.schedules:
                upcoming = next(CronSim(expand(expr), now))
                if soonest is None or upcoming < soonest:
                    soonest = upcoming
        return soonest

    def run_webhook(self, job: WebhookJob, *, deliver: bool = True) -> RunResult | None:
        if not job.persona:  # an outcome no persona is triggered by (issue 18)
            recorded = promotion.observe_trigger(
                self.session.runtime,
                list(self.session.manifest.personas),
                provider=job.provider,
                kind=job.kind,
                metadata=job.metadata,
                payload=job.payload,
                at=self.session.options.clock()(),
            )
            for entry in recorded:
                self._say(f"outcome {job.provider} -> {entry['persona']} {entry.get('work_key')}")
            return None
        result = run_in_session(
            self.session,
            job.persona,
            provider=job.provider,
            kind=job.kind,
            metadata=job.metadata,
            payload=job.payload,
        )
        self._say(f"webhook {job.provider} -> {job.persona} {result.work_key}", result)
        if deliver:
            self.deliver()
        return result

    def deliver(self) -> list[RunResult]:
        """Run every persona's inbox handoffs (bounded: one pass)."""
        results: list[RunResult] = []
        for persona in self.session.manifest.personas:
            state = self.session.runtime.state(persona.name)
            if not state.inbox:
                continue
            # a handoff waiting in the queue (max_concurrency) is the drain's: offering it
            # again each tick recorded a coalesced (later a duplicate) run, forever
            queued = state.queued_keys()
            for item in list(state.inbox):
                if self.stopping():
                    return results
                if f"handoff:{item['handoff_id']}" in queued:
                    continue
                try:
                    result = run_handoff_in_session(self.session, persona.name, item["handoff_id"])
                except (RunError, PersonaRuntimeError) as exc:
                    # another worker or replica took it first (or it is gone): not ours
                    self._say(f"handoff -> {persona.name} {item['handoff_id']}: skipped ({exc})")
                    continue
                self._say(f"handoff -> {persona.name} {result.work_key}", result)
                results.append(result)
        return results


def foreign_personas(manifest: Any) -> dict[str, str]:
    """Personas whose entry workflow is for another host, with why they never run here."""
    return {
        p.name: p.entry_workflow.foreign_message
        for p in manifest.personas
        if not p.entry_workflow.runnable
    }


def match_personas(
    session_or_manifest: Any, provider: str, kind: str | None, payload: Mapping[str, Any]
) -> tuple[list[str], str]:
    """Personas that declare this trigger, and its work key (raises TriggerError)."""
    normalized = normalize_trigger(provider, kind, None, payload=payload)
    manifest = getattr(session_or_manifest, "manifest", session_or_manifest)
    names = [
        p.name
        for p in manifest.personas
        if declares_trigger([str(t) for t in p.triggers], normalized.provider, normalized.kind)
    ]
    return names, normalized.work_key


class Server:
    """The HTTP front (webhooks, status) plus the worker thread."""

    def __init__(
        self,
        options: RunOptions,
        *,
        host: str = "127.0.0.1",
        port: int = 8787,
        secrets: Mapping[str, str] | None = None,
        log_line: Callable[[str], None] = print,
        access: Any = None,
        workers: int = 1,
        max_body_bytes: int = MAX_BODY_BYTES,
        insecure_unsigned: Iterable[str] = (),
    ) -> None:
        """``max_body_bytes``: larger webhook bodies are refused (413);
        ``insecure_unsigned``: providers whose webhooks are accepted without a secret
        (every other provider without one is refused, 401)."""
        from .web import Access, Metrics, bind_socket

        if workers < 1:
            raise RunError(f"--workers must be at least 1, got {workers}")
        self.workers = workers
        # a run waiting for an approval parks instead of holding the worker
        # one state cache for every thread's session: each persona's new events (many
        # written by other replicas) are read and folded once per replica, not per thread
        cache = options.state_cache if options.state_cache is not None else StateCache()
        options = dataclasses.replace(options, park_approvals=True, state_cache=cache)
        self.options = options
        self.log_line = log_line
        self.secrets = {k.lower(): v for k, v in (secrets or {}).items()}
        if max_body_bytes < 1:
            raise RunError(f"--max-body-bytes must be at least 1, got {max_body_bytes}")
        self.max_body_bytes = max_body_bytes
        self.insecure_unsigned = frozenset(p.lower() for p in insecure_unsigned)
        # wake-ups for workers (persona names); the accepted work itself is in the log
        self.jobs: queue.Queue[str | WebhookJob] = queue.Queue()
        self._accept_pool = ThreadPoolExecutor(1, thread_name_prefix="charter-accept")
        self._accept_session: Session | None = None
        # wake-ups waiting per persona: more than one per worker wakes no one more
        self._wakes: dict[str, int] = {}
        self._wakes_lock = threading.Lock()
        self._own_queued: set[int] = set()  # see _own
        # webhooks waiting for the accept thread: taken together, one transaction a turn
        self._accepting: list[_Pending] = []
        self._accepting_lock = threading.Lock()
        self._outage: float | None = None  # when the store became unreachable
        self._outage_lock = threading.Lock()
        self._generation = 0  # bumped per outage: every worker reconnects
        self._opened = 0  # workers whose first session is open (ready: all of them)
        self.stopping = threading.Event()
        self.ready = threading.Event()
        self.listening = threading.Event()
        self.worker_error: BaseException | None = None
        self.job_errors = 0  # jobs that raised and were reported (GET /status)
        self.metrics = Metrics()  # /metrics of this server (admission latency observed here)
        probe = open_session(options)  # validate the manifest and the store up front
        self.manifest = probe.manifest
        self._foreign = foreign_personas(self.manifest)
        probe.close()
        environ = os.environ if options.env is None else options.env
        self.access = access if access is not None else Access.from_env(environ, host=host)
        self.socket = bind_socket(host, port)
        self.http: Any = None

    @property
    def address(self) -> str:
        host, port = self.socket.getsockname()[:2]
        return f"http://{host!s}:{port}"

    def secret_for(self, provider: str) -> str | None:
        if provider.lower() in self.secrets:
            return self.secrets[provider.lower()]
        environ = os.environ if self.options.env is None else self.options.env
        return environ.get(SECRET_ENV.format(provider.upper().replace("-", "_"))) or None

    def status(self) -> dict[str, Any]:
        personas, routes = runtime_specs(self.manifest)
        log = open_event_log(
            state_dir=self.options.state_dir, url=self.options.state_url, env=self.options.env
        )
        try:
            runtime = PersonaRuntime(log, personas, routes=routes)
            now = self.options.clock()()
            return {
                "at": format_time(now),
                "queued_jobs": self.jobs.qsize(),
                "job_errors": self.job_errors,
                "personas": {name: runtime.status(name, now=now).to_dict() for name in personas},
            }
        finally:
            log.close()

    def accept_webhook(
        self, provider: str, body: bytes, headers: Mapping[str, str]
    ) -> tuple[int, dict[str, Any]]:
        """``POST /hooks/{provider}``: verify, normalise, queue; ``(http status, body)``."""
        provider = provider.lower()
        if self.stopping.is_set():
            return 503, {"error": "shutting down"}
        started = time.perf_counter()
        if len(body) > self.max_body_bytes:
            self.log_line(f"webhook {provider}: body of {len(body)} bytes, refused (413)")
            return 413, {"error": f"body over {self.max_body_bytes} bytes"}
        secret = self.secret_for(provider)
        if secret is None and provider not in self.insecure_unsigned:
            env = SECRET_ENV.format(provider.upper().replace("-", "_"))
            self.log_line(f"webhook {provider}: no secret configured, refused (401)")
            return 401, {
                "error": f"no secret configured for {provider}: set ${env} (or --secret), "
                f"or start serve with --insecure-accept-unsigned {provider}"
            }
        if secret is not None and not verify_webhook(provider, secret, body, headers, time.time()):
            self.log_line(f"webhook {provider}: bad signature, refused (401)")
            return 401, {"error": "bad signature"}
        try:
            payload = json.loads(body or b"{}")
            if not isinstance(payload, dict):
                raise ValueError("a webhook payload must be a JSON object")
            if provider == "slack" and payload.get("type") == "url_verification":
                # Slack's handshake when the endpoint is configured: echo the challenge
                return 200, {"challenge": str(payload.get("challenge") or "")}
            kind = webhook_kind(provider, headers.get("x-github-event"), payload)
            names, work_key = match_personas(self.manifest, provider, kind, payload)
            # another host's persona never runs here: its work is not accepted
            names = [n for n in names if n not in self._foreign]
        except (ValueError, TriggerError) as exc:
            return 400, {"error": str(exc)}
        # a trigger that reports an outcome (a review submitted, a PR merged) may settle
        # earlier proposals' agreement: observed by a worker in arrival order, also when
        # the trigger itself is refused (its key still running) or runs nothing
        outcome = outcome_from_trigger(provider, kind, None, payload) is not None
        delivery = delivery_id(provider, headers, payload)
        pending = _Pending(names, provider, kind, payload, delivery)
        with self._accepting_lock:
            self._accepting.append(pending)
        try:
            # durable before the 202: a crash after it loses nothing (charter.runtime.accept).
            # Whichever turn of the accept thread comes first records every webhook waiting
            # then, in one transaction (group commit); later turns find theirs done.
            self._accept_pool.submit(self._accept_waiting)
            accepted = pending.done.result(timeout=60)
        except Exception as exc:
            with self._accepting_lock:  # not taken yet (timed out, shutting down): never
                if pending in self._accepting:  # recorded after its 503
                    self._accepting.remove(pending)
            if store_error(exc):
                self.store_down(exc)
                self._accept_pool.submit(self._close_accept)  # reconnect on the next one
            else:
                self.log_line(f"webhook {provider}: could not be recorded ({exc}); 503")
            return 503, {"error": f"could not record the webhook: {exc}"}
        took: list[str] = []
        refused: dict[str, dict[str, Any]] = {}
        for receipt in accepted:
            self.log_line(
                f"webhook {provider} -> {receipt.persona} {work_key}: {receipt.status.value}"
            )
            if receipt.status in ACCEPTED:
                took.append(receipt.persona)
            else:
                refused[receipt.persona] = {
                    "status": receipt.status.value,
                    "reason": receipt.error or receipt.exhaustion_reason,
                }
        if outcome:
            self.jobs.put(WebhookJob("", provider, kind, payload, {}))
        self.metrics.admission.observe(time.perf_counter() - started)
        answer: dict[str, Any] = {"work_key": work_key, "personas": took}
        if refused:
            answer["refused"] = refused
        if delivery:
            answer["delivery_id"] = delivery
        return 202, answer

    def wake(self, job: str) -> None:
        """Wake a worker for ``job`` (a persona with queued work, or :data:`PARKED`),
        unless a wake-up for it is already waiting. A worker drains a queue until it is
        empty, and one that admits an item while more wait and slots are free wakes the
        next worker before it runs its own (``drain_in_session``'s ``more``): a burst
        spreads over the workers one admission at a time, and a single item wakes one
        worker per replica, not every worker (with a wake-up per worker, two workers
        raced for each item and one took the log's lock for nothing: 154 empty
        transactions per 200 webhooks on one replica)."""
        with self._wakes_lock:
            if self._wakes.get(job, 0) >= 1:
                return
            self._wakes[job] = 1
        self.jobs.put(job)

    def _own(self, event_id: int) -> bool:
        """Whether this replica's accept thread queued ``event_id`` (and woke for it)."""
        with self._wakes_lock:
            return event_id in self._own_queued

    def _forget_own(self, upto: int) -> None:
        """The watcher is past ``upto``: it will not ask about those ids again."""
        with self._wakes_lock:
            self._own_queued = {i for i in self._own_queued if i > upto}

    def _requeue(self, job: str | WebhookJob) -> None:
        if isinstance(job, str):
            with self._wakes_lock:
                self._wakes[job] = self._wakes.get(job, 0) + 1
        self.jobs.put(job)

    def _taken(self, job: str | WebhookJob) -> None:
        if isinstance(job, str):
            with self._wakes_lock:
                self._wakes[job] = max(0, self._wakes.get(job, 0) - 1)

    def _accept_waiting(self) -> None:
        """On the accept thread (one session, one connection): record every webhook
        waiting, in arrival order, in one transaction. Each request is answered only
        after the commit; if the transaction fails, every request in it gets the error
        (503) and none of them was recorded."""
        with self._accepting_lock:
            batch, self._accepting = self._accepting, []
        work: list[tuple[str, WorkItem]] = []
        taken: list[tuple[_Pending, int]] = []  # each request and how many items it has
        try:
            runtime = self._open_accept().runtime
        except BaseException as exc:
            for pending in batch:
                pending.done.set_exception(exc)
            return
        for pending in batch:
            try:  # a request that cannot be built fails alone, not its neighbours
                items = [
                    (name, runtime.trigger_item(name, provider=pending.provider,
                                                kind=pending.kind, payload=pending.payload,
                                                delivery_id=pending.delivery))
                    for name in pending.names
                ]  # fmt: skip
            except Exception as exc:
                pending.done.set_exception(exc)
                continue
            work += items
            taken.append((pending, len(items)))
        if not taken:
            return
        try:
            receipts = runtime.accept_many(work, at=self.options.clock()()) if work else []
        except BaseException as exc:
            for pending, _ in taken:
                pending.done.set_exception(exc)
            return
        self.store_back()
        # wake a worker for what was queued (the queue itself is in the log); the watcher
        # will see these events too and leaves them to this wake-up: two wake-ups for one
        # item sent two workers racing for it, one taking the log's lock for nothing
        queued = [r for r in receipts if r.status is ReceiptStatus.QUEUED]
        with self._wakes_lock:
            if len(self._own_queued) > OWN_QUEUED_MAX:  # (a watcher that is away)
                self._own_queued.clear()
            self._own_queued.update(i for r in queued for i in r.event_ids)
        for name in dict.fromkeys(r.persona for r in queued):
            self.wake(name)
        at = 0
        for pending, count in taken:
            pending.done.set_result(receipts[at : at + count])
            at += count

    def _open_accept(self) -> Session:
        """The accept thread's session, opened on first use (or at start-up)."""
        if self._accept_session is None:
            self._accept_session = open_session(self.options)
        return self._accept_session

    def _close_accept(self) -> None:
        if self._accept_session is not None:
            with contextlib.suppress(Exception):
                self._accept_session.close()
            self._accept_session = None

    def work(self) -> None:
        """Worker 0: schedules, parked runs, queues, handoffs, and accepted work."""
        self._worker(primary=True)

    def work_jobs(self) -> None:
        """A pool worker: runs accepted webhook work (worker 0 also fires schedules,
        resumes parked runs and delivers handoffs)."""
        self._worker(primary=False)

    def _worker(self, *, primary: bool) -> None:
        session: Session | None = None
        first = True
        delay = BACKOFF_START
        tick_after = 0.0  # (monotonic) the primary's next tick between jobs
        upcoming: datetime | None = None
        try:
            generation = self._generation
            while not self.stopping.is_set():
                try:
                    if session is not None and generation != self._generation:
                        # another thread found the store gone: this connection went too
                        with contextlib.suppress(Exception):
                            session.close()
                        session = None
                    if session is None:
                        generation = self._generation
                        session = open_session(self.options)
                        supervisor = Supervisor(
                            session, log_line=self.log_line if primary and first else _quiet
                        )
                        supervisor.log_line = self.log_line
                        supervisor.more = self.wake
                        supervisor.stopping = self.stopping.is_set
                        tick_after = 0.0  # a fresh session ticks at once
                        self.store_back()
                        delay = BACKOFF_START
                        if first:
                            self._connected()
                        if primary and first:
                            # "listening on ..." is the first line scripts read
                            while not self.listening.wait(0.1) and not self.stopping.is_set():
                                pass
                        first = False
                    if primary:
                        now = self.options.clock()()
                        # schedules, parked runs, every queue, handoffs: once per
                        # TICK_EVERY_S between jobs, and at once when a schedule is due
                        # (it read every persona's state after every job: three reads per
                        # webhook at load, for what wake-ups already bring)
                        mono = time.monotonic()
                        if mono >= tick_after or (upcoming is not None and upcoming <= now):
                            supervisor.tick(now)
                            tick_after = mono + TICK_EVERY_S
                        upcoming = supervisor.next_due(now)
                        wait = 1.0 if upcoming is None else (upcoming - utc_now()).total_seconds()
                    else:
                        wait = 0.5
                    try:
                        job = self.jobs.get(timeout=max(0.05, min(1.0, wait)))
                    except queue.Empty:
                        continue
                    self._taken(job)
                    if generation != self._generation:
                        self._requeue(job)  # reconnect first (top of the loop), then take it
                        continue
                    supervisor.take(job)
                except Exception as exc:
                    if first:
                        raise
                    if store_error(exc):
                        # the database went away: nothing is lost (the work is in the log);
                        # reconnect with backoff, and say so once per outage, not per request
                        self.store_down(exc)
                    else:
                        # one job failed unexpectedly (a bug, a persona's broken state): say
                        # so and go on. Its work is in the log (still queued, or a lease the
                        # recovery rule expires), so nothing is lost, and one bad job does
                        # not take the replica and everything else it would run with it.
                        self.job_failed(exc)
                    if session is not None:  # a fresh connection either way
                        with contextlib.suppress(Exception):
                            session.close()
                        session = None
                    self.stopping.wait(delay)
                    delay = min(delay * 2, BACKOFF_MAX)
        except BaseException as exc:  # reported by serve_forever's caller
            self.worker_error = exc
            self.ready.set()
            self.stopping.set()
        finally:
            if session is not None:
                with contextlib.suppress(Exception):
                    session.close()

    def _forget_states(self) -> None:
        """The replica's shared states start over with the database: as each thread's
        own cache did when its session was opened again after an outage."""
        if self.options.state_cache is not None:
            self.options.state_cache.clear()

    def _connected(self) -> None:
        """A worker's first session is open: ready when every worker's is."""
        with self._outage_lock:
            self._opened += 1
            if self._opened == self.workers:
                self.ready.set()

    def job_failed(self, exc: BaseException) -> None:
        """Report a job that raised (the line, and the traceback on stderr)."""
        with self._outage_lock:
            self.job_errors += 1
        self.log_line(
            f"worker error ({type(exc).__name__}: {exc}); the job's work stays in the log, "
            "the worker goes on"
        )
        traceback.print_exception(exc, file=sys.stderr)

    def store_down(self, exc: BaseException) -> None:
        with self._outage_lock:
            if self._outage is None:
                self._outage = time.monotonic()
                self._generation += 1
                self._forget_states()
                self.log_line(f"state store unavailable ({exc}); retrying with backoff")
                # every connection of this process went with it: the accept thread's
                # reconnects too, so it does not find out later and report it again
                self._accept_pool.submit(self._close_accept)

    def store_back(self) -> None:
        with self._outage_lock:
            if self._outage is not None:
                took = time.monotonic() - self._outage
                self._outage = None
                self._forget_states()  # (and what a session put while it went away)
                self.log_line(f"state store reachable again after {took:.1f}s")

    def watch(self) -> None:
        """Wake workers for work recorded by anyone (another replica's webhook, an approval
        from another host): ``LISTEN/NOTIFY`` on PostgreSQL, a short poll on SQLite."""
        cursor: int | None = None
        delay = BACKOFF_START
        later: dict[str, float] = {}  # persona -> when to wake a worker for it
        while not self.stopping.is_set():
            log = None
            try:
                log = open_event_log(
                    state_dir=self.options.state_dir,
                    url=self.options.state_url,
                    env=self.options.env,
                )
                if cursor is None:
                    cursor = log.last_event_id()
                delay = BACKOFF_START
                while not self.stopping.is_set():
                    now = time.monotonic()
                    for name, due in list(later.items()):
                        if due <= now:
                            del later[name]
                            self.wake(name)
                    wait = min([0.5, *(due - now for due in later.values())])
                    if not log.wait_for_append(cursor, max(0.001, wait)):
                        continue
                    if log.kinds_seen is not None and not (log.kinds_seen & WAKE_KINDS):
                        # told what was appended, and none of it wakes a worker: no read
                        cursor = max(cursor, log.last_seen)
                        self._forget_own(cursor)
                        continue
                    # every id up to last_seen is committed: only the events that wake a
                    # worker are read (one replica's watcher reads after every commit of
                    # the fleet, so reading them all cost each replica every event)
                    head = log.last_seen
                    for event in log.read(after=cursor, kinds=WAKE_KINDS):
                        head = max(head, event.event_id)
                        if event.kind != Kind.WORK_QUEUED:
                            self.wake(PARKED)
                        elif not self._own(event.event_id):
                            # another replica queued it and woke a worker of its own:
                            # look a moment later, when that one has most likely taken
                            # it (racing it cost the log's lock for nothing, once per
                            # item and replica); taken if it is still there then
                            due = time.monotonic() + REMOTE_WAKE_DELAY_S
                            later.setdefault(event.persona, due)
                    cursor = max(cursor, head)
                    self._forget_own(cursor)
            except Exception as exc:  # the workers report the outage; retry quietly
                if not store_error(exc):
                    self.log_line(f"watch stopped ({exc}); workers fall back to their tick")
                    return
                self.stopping.wait(delay)
                delay = min(delay * 2, BACKOFF_MAX)
            finally:
                if log is not None:
                    with contextlib.suppress(Exception):
                        log.close()

    def serve(self) -> None:
        worker = threading.Thread(target=self.work, name="charter-serve-worker", daemon=True)
        worker.start()
        watcher = threading.Thread(target=self.watch, name="charter-serve-watch", daemon=True)
        watcher.start()
        pool = [
            threading.Thread(target=self.work_jobs, name=f"charter-serve-worker-{n}", daemon=True)
            for n in range(1, self.workers)
        ]
        for thread in pool:
            thread.start()
        self.ready.wait()
        from .web import build_app, http_server

        app = build_app(self.options, access=self.access, server=self)
        self.http = http_server(app, self.socket)
        http = threading.Thread(
            target=self.http.run, kwargs={"sockets": [self.socket]}, name="charter-serve-http"
        )
        http.daemon = True
        http.start()
        self._warm_up(http)
        self.log_line(
            f"listening on {self.address} (POST /hooks/{{provider}}, GET /status, /console)"
        )
        self.listening.set()
        # everything loaded so far (modules, the app, the sessions) lives as long as the
        # replica: out of the collector's way, a full collection walks only what the
        # requests create. Before, each full collection stopped every thread for up to
        # 28 ms here, which reached the webhooks' p99 (runtime_fleet.py: 89 -> 67 ms on
        # SQLite, 112 -> 96 ms on one PostgreSQL replica, alternating runs)
        gc.freeze()
        try:
            self.stopping.wait()
        finally:
            self.log_line("shutting down: no new work; finishing the job in flight")
            self.stopping.set()
            self.http.should_exit = True
            http.join(timeout=10)
            self.socket.close()
            worker.join()
            for thread in pool:
                thread.join()
            self._accept_pool.submit(self._close_accept).result(timeout=30)
            self._accept_pool.shutdown()
            self.log_line("stopped")
        if self.worker_error is not None:
            raise self.worker_error

    def stop(self) -> None:
        self.stopping.set()

    def _warm_up(self, http: threading.Thread) -> None:
        """Before "listening": the accept thread's connection open and the HTTP server
        serving. The first webhook of each replica opened them (31 ms against 5 warm,
        alone; 80-150 ms with four replicas starting under load, the fleet's p99)."""
        with contextlib.suppress(Exception):  # a store down now: the first webhook retries
            self._accept_pool.submit(self._open_accept).result(timeout=30)
        deadline = time.monotonic() + 10
        while not self.http.started and http.is_alive() and time.monotonic() < deadline:
            time.sleep(0.005)
        # one request through the whole HTTP path (its first one imports and builds what
        # every later one reuses), to the readiness probe: it also checks the database
        import http.client as http_client

        host, port = self.socket.getsockname()[:2]
        with contextlib.suppress(OSError):
            probe = http_client.HTTPConnection(host, port, timeout=10)
            try:
                probe.request("GET", "/readyz")
                probe.getresponse().read()
            finally:
                probe.close()


def serve_once(options: RunOptions, *, log_line: Callable[[str], None] = print) -> list[RunResult]:
    """Fire what is due at ``options.at`` (or now), take up decided parked runs, deliver
    handoffs, and return."""
    session = open_session(dataclasses.replace(options, park_approvals=True))
    try:
        supervisor = Supervisor(session, log_line=log_line)
        return supervisor.tick(options.clock()())
    finally:
        session.close()


__all__ = [
    "Server",
    "Supervisor",
    "due_minute",
    "last_fired",
    "schedule_key",
    "MAX_BODY_BYTES",
    "serve_once",
    "verify_signature",
    "verify_webhook",
    "webhook_kind",
]
