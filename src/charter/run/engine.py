"""``run_persona``: admission by the runtime, then the entry workflow under the charter."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import json
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from charter.agent import builtin_tools, get_provider, persona_stages
from charter.manifest import Persona
from charter.policy import make_context, with_execution_policy
from charter.runtime import (
    BUILTIN_PREDICATES,
    Batch,
    EventLog,
    Handoff,
    HandoffError,
    HandoffRecord,
    Kind,
    ReceiptStatus,
    RouteContext,
    RunReceipt,
    UnknownRunError,
    WorkItem,
    adopt_handoff_policy,
    dispatch_handoff,
    format_time,
    open_event_log,
    parse_time,
    render_status,
    select_route,
)
from charter.runtime.budget import spent_in_windows

from . import evidence, promotion
from .approvals import InteractiveApprover, decided
from .autonomy import AutonomyGate, durable_wait
from .budget import LiveBudget
from .context import RunContext, TriggerEnvelope
from .control import HandoffIntent, RunControl
from .errors import (
    ModelProviderFailed,
    PricingError,
    ReceiptError,
    RunError,
    RunStopped,
    WorkflowLoadError,
)
from .events import RunKind
from .leases import LeaseKeeper
from .loader import load_context_packs, load_workflow
from .models import ModelRouter
from .parking import JOURNAL_KINDS, Journal, Replay, RunParked, journal_of
from .receipts import ReceiptLog
from .rollout import cohort_values, select_arm
from .session import RunOptions, Session, session_scope
from .tiers import effective_tier

#: Statuses after which ``charter persona run`` exits 0.
OK_STATUSES = frozenset({"completed", "queued", "duplicate", "parked"})


@dataclass
class RunResult:
    """The run record: admission, what the workflow did, receipts, spend and snapshots."""

    status: str
    persona: str
    work_key: str | None
    run_id: str | None = None
    admission: dict[str, Any] = field(default_factory=dict)
    trigger: dict[str, Any] | None = None
    autonomy: dict[str, Any] = field(default_factory=dict)
    receipt_policy: str | None = None
    result: Any = None
    error: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    dry_runs: list[dict[str, Any]] = field(default_factory=list)
    proposals: list[dict[str, Any]] = field(default_factory=list)
    denied: list[dict[str, Any]] = field(default_factory=list)
    approvals: list[dict[str, Any]] = field(default_factory=list)
    handoffs: list[dict[str, Any]] = field(default_factory=list)
    receipts: list[dict[str, Any]] = field(default_factory=list)
    budget: dict[str, Any] = field(default_factory=dict)
    budget_stop: dict[str, Any] | None = None
    stages: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    persona_runtime: list[dict[str, Any]] = field(default_factory=list)
    finish: dict[str, Any] | None = None
    drained: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status in OK_STATUSES

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def record(self) -> dict[str, Any]:
        """The compact record stored as ``persona.run.recorded`` (no transcripts)."""
        out = self.to_dict()
        out["receipts"] = [
            {k: r.get(k) for k in ("receipt_id", "kind", "event_id")} for r in self.receipts
        ]
        record: dict[str, Any] = _jsonable(out)
        return record


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def runtime_snapshot(
    session: Session, name: str, at: datetime, phase: str, *, held: bool = False
) -> dict[str, Any]:
    """A ``persona_runtime[]`` entry: lifecycle, budget, handoffs and receipts at ``at``
    (``held``: as of the session's own last write, see ``PersonaRuntime.status``)."""
    return _snapshot(session.runtime.status(name, now=at, held=held).to_dict(), phase)


def _snapshot(status: dict[str, Any], phase: str) -> dict[str, Any]:
    counters = status["counters"]
    return {
        "phase": phase,
        "persona": status["name"],
        "version": status["version"],
        "at": status["at"],
        "lifecycle": status["lifecycle"],
        "budget": status["budget"],
        "queue": status["queue"]["count"],
        "handoffs": {
            "inbox": [h["handoff_id"] for h in status["inbox"]["items"]],
            "dispatched": counters.get("handoffs_dispatched", 0),
        },
        "receipts": {
            "value_receipts": status["value_receipts"]["count"],
            "last_budget_receipt_id": status["budget"]["last_receipt_id"],
        },
        "last_run": status["last_run"],
        "last_event_id": status["last_event_id"],
    }


def _stages(persona: Persona) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for stage in persona.stages:
        on_exit: dict[str, str] = {}
        if stage.on_exit is not None:
            if stage.on_exit.on_complete:
                on_exit["on_complete"] = stage.on_exit.on_complete
            if stage.on_exit.on_failure:
                on_exit["on_failure"] = stage.on_exit.on_failure
        out.append(
            {
                "name": stage.name,
                "allowed_tools": None if stage.allowed_tools is None else list(stage.allowed_tools),
                "side_effect_level": stage.side_effect_level.label
                if stage.side_effect_level is not None
                else None,
                "max_iterations": stage.max_iterations,
                "on_exit": on_exit,
            }
        )
    return out


@contextlib.contextmanager
def _policy_stack(
    persona: Persona, inbox_item: Mapping[str, Any] | None
) -> Iterator[list[dict[str, Any]]]:
    """Persona frame, then (handoff runs) the override replacing it, then stages for @step."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(
            with_execution_policy(
                persona.effective_policy, label=f"persona:{persona.name}", kind="persona"
            )
        )
        if inbox_item is not None:
            stack.enter_context(adopt_handoff_policy(inbox_item))
        run = stack.enter_context(persona_stages(persona.name, _stages(persona)))
        yield run.receipts


def _invoke(func: Any, ctx: RunContext) -> Any:
    value = func(ctx)
    if inspect.iscoroutine(value):
        value = asyncio.run(value)
    return value


def _custom_predicates(session: Session, persona: str, intent: HandoffIntent) -> dict[str, Any]:
    names: set[str] = set()
    for route in session.manifest.routes_from(persona):
        names.update(step.when for step in route.route if step.when not in BUILTIN_PREDICATES)
    names.update(intent.facts)
    return {name: _constant(bool(intent.facts.get(name, False))) for name in names}


def _constant(value: bool) -> Any:
    def predicate(_handoff: Handoff, _context: RouteContext) -> bool:
        return value

    return predicate


def _route_override(
    session: Session, handoff: Handoff, context: RouteContext
) -> dict[str, Any] | None:
    selected = select_route(session.runtime.routes, handoff, context)
    if selected is None:
        return None
    for route in session.manifest.handoff_routes:
        if route.id == selected.route_id and selected.rule_index < len(route.route):
            override = route.route[selected.rule_index].policy_override
            return override.to_dict() if override is not None else None
    return None


def _dispatch_handoffs(
    session: Session,
    persona: Persona,
    control: RunControl,
    at: datetime,
    warnings: list[str],
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    exhausted = control.stop is not None
    for intent in control.handoffs:
        context = RouteContext(
            budget_exhausted=exhausted,
            approval_denied=control.approval_denied,
            predicates=_custom_predicates(session, persona.name, intent),
        )
        handoff = Handoff(
            intent.kind,
            persona.name,
            {**intent.payload, "run_id": control.run_id},
            intent.summary,
            intent.policy_override,
        )
        try:
            if handoff.policy_override is None:
                override = _route_override(session, handoff, context)
                if override is not None:
                    handoff = dataclasses.replace(handoff, policy_override=override)
            delivered: list[dict[str, Any]] = []

            def send_a2a(record: HandoffRecord, sink: list[dict[str, Any]] = delivered) -> None:
                from . import a2a

                sink.append(a2a.deliver(session.runtime, record, at=at, env=session.options.env))

            record = dispatch_handoff(
                session.runtime, handoff, at=at, context=context, dispatchers={"a2a": send_a2a}
            )
        except HandoffError as exc:
            out.append({"status": "unrouted", "kind": intent.kind, "error": str(exc)})
            continue
        entry = {"status": "dispatched", **record.to_dict()}
        if delivered:
            entry["delivery"] = delivered[0]
            if delivered[0]["status"] == "failed":
                warnings.append(
                    f"a2a handoff {record.handoff_id} to {record.route.target} failed: "
                    f"{delivered[0].get('error')}"
                )
        out.append(entry)
    return out


def execute_admitted(
    session: Session,
    persona: Persona,
    admission: RunReceipt,
    envelope: TriggerEnvelope,
    inbox_item: Mapping[str, Any] | None = None,
    *,
    replay: Mapping[str, Any] | None = None,
    running: bool = False,
) -> RunResult:
    """Run the entry workflow of an admitted (held) run, then finish it in the runtime.

    ``running``: the admission already recorded the run running (a drained queue item,
    an unparked run), so its first heartbeat is skipped while the lease is fresh.

    With ``options.park_approvals`` a call waiting for an approval parks the run (status
    ``parked``, lease released); ``replay`` is a parked run's journal, replayed when it is
    taken up again (:mod:`charter.run.parking`)."""
    options = session.options
    runtime = session.runtime
    clock = options.clock()
    name = persona.name
    run_id = admission.run_id
    assert run_id is not None, "an admitted run has a run id"
    started = time.monotonic()
    elapsed = options.elapsed or (lambda: time.monotonic() - started)
    result = RunResult(
        status="running",
        persona=name,
        work_key=admission.work_key,
        run_id=run_id,
        admission=admission.to_dict(),
        trigger=envelope.to_dict(),
        receipt_policy=persona.receipt_policy.value,
    )
    if not (running and _lease_fresh(admission, clock(), runtime.spec(name).lease_ttl_seconds)):
        try:
            runtime.heartbeat(name, run_id, at=clock())
        except UnknownRunError as exc:
            # expired before it started (another process recovered it): the run is failed
            # by the recovery rule already; nothing ran, nothing to finish
            result.status, result.error = "failed", f"lease lost before the run started: {exc}"
            return result
    # as of the admission (or the first heartbeat): this run's own last write
    result.persona_runtime.append(runtime_snapshot(session, name, clock(), "started", held=True))

    arm = select_arm(
        persona.rollout_policy,
        envelope.work_key,
        cohort_values(envelope.provider, envelope.metadata, envelope.payload),
    )
    # only criteria make a standing possible (promote needs them, demotion judges by them)
    standing = (
        evidence.load(session.log, name).standing if persona.rollout_policy.promotion else None
    )
    tier, reason = effective_tier(
        persona.autonomy_tier.value,
        persona.rollout_policy,
        envelope.work_key,
        options.tier,
        arm=arm,
        standing=standing,
    )
    result.autonomy = {
        "declared": persona.autonomy_tier.value,
        "effective": tier,
        "reason": reason,
        "arm": arm.arm,
        "rollout": arm.to_dict(),
        "standing": standing,
    }
    state = runtime.state(name)
    now = clock()
    hour_usd, day_usd, day_tokens = spent_in_windows(state.spend, now)
    budget = LiveBudget(
        persona.budget,
        session.prices,
        hour_usd=hour_usd,
        day_usd=day_usd,
        day_tokens=day_tokens,
        hour_window=now.strftime("%Y-%m-%dT%H"),
        day_window=now.strftime("%Y-%m-%d"),
        elapsed=elapsed,
    )
    receipts = ReceiptLog(runtime, name, run_id, persona.receipt_policy.value, clock)
    control = RunControl(name, run_id, tier, receipts, budget, tier_reason=reason)
    control.park = options.park_approvals
    if replay is not None:
        journal = Journal.from_dict(dict(replay))
        control.replay = Replay(journal)
        budget.run_usd, budget.run_tokens = journal.run_usd, journal.run_tokens
    workspace = Path(options.workspace) if options.workspace is not None else session.base
    lease_ttl = runtime.spec(name).lease_ttl_seconds
    approver = options.approver
    gate = AutonomyGate(
        control,
        context=make_context(str(workspace)),
        approver=approver,
        wait=durable_wait(
            control,
            timeout=options.approval_timeout,
            heartbeat=lambda: _heartbeat(runtime, name, run_id, clock()),
            heartbeat_every=max(1.0, lease_ttl / 3),
        ),
        notify=options.notify,
    )
    error: str | None = None
    status = "completed"
    stage_receipts: list[dict[str, Any]] = []
    try:
        spec = options.provider_spec()
        provider = get_provider(spec)
        router = ModelRouter(
            persona.model_policy,
            control,
            provider,
            model_override=options.model,
            frontier_escalations=persona.budget.frontier_escalations,
        )
        packs = load_context_packs(persona, session.base)
        func = load_workflow(persona, session.base)
        ctx = RunContext(
            persona=persona,
            run_id=run_id,
            trigger=envelope,
            tier=tier,
            context_packs=packs,
            workspace=workspace,
            pack_dir=session.base,
            control=control,
            gate=gate,
            router=router,
            provider_spec=spec,
            tools=builtin_tools(str(workspace), ask_user=_user_callback(options.user)),
            daemon_dir=_daemon_dir(session),
        )
        with (
            _policy_stack(persona, inbox_item) as stage_receipts,
            _keep_lease(session, control, name, run_id, lease_ttl, clock),
        ):
            result.result = _jsonable(_invoke(func, ctx))
    except RunStopped as stopped:
        status = stopped.status
        error = str(stopped)
    except RunParked as waiting:
        return _park(session, persona, result, control, envelope, inbox_item, waiting)
    except (WorkflowLoadError, PricingError, ReceiptError, ModelProviderFailed) as exc:
        status, error = "failed", str(exc)
    except Exception as exc:
        status = "failed"
        tb = traceback.extract_tb(exc.__traceback__)
        where = f" ({tb[-1].filename}:{tb[-1].lineno})" if tb else ""
        error = f"{type(exc).__name__}: {exc}{where}"
    if control.stop is not None:
        status = "budget_exhausted"
        error = control.stop.message
    elif control.fatal is not None:
        status, error = "failed", control.fatal
    result.stages = _jsonable(stage_receipts)

    if control.fatal is None:
        result.handoffs = _dispatch_handoffs(session, persona, control, clock(), result.warnings)
    if control.stop is not None:
        stop = control.stop
        exhausted_payload = {
            "work_key": envelope.work_key,
            "source": envelope.source,
            "run_id": run_id,
            "during_run": True,
            **stop.to_payload(),
        }

        def body(batch: Batch) -> dict[str, Any]:
            receipt_id = batch.new_id("budget")
            event = batch.emit(
                name, Kind.BUDGET_EXHAUSTED, {**exhausted_payload, "receipt_id": receipt_id}
            )
            return {"receipt_id": receipt_id, "event_id": event.event_id, **exhausted_payload}

        result.budget_stop = runtime.transact(clock(), body)
    # The run's end and its record (transcripts too) are one transaction: a crash leaves
    # either both or neither, and a run costs one write fewer.
    finished: list[RunResult] = []
    # The record apart from the finish itself is taken before the finish's transaction:
    # encoding it there, under the log's lock, was most of that transaction's own time.
    concluded: RunResult | None = None
    early: dict[str, Any] = {}
    transcript = {"agents": control.transcripts} if control.transcripts else None
    try:
        candidate = dataclasses.replace(
            result, persona_runtime=list(result.persona_runtime), warnings=list(result.warnings)
        )
        _conclude(candidate, status, error, control, receipts, budget)
        early = candidate.record()
        json.dumps(transcript)  # emit nothing unless everything can be stored
        concluded = candidate
    except Exception:  # the record is written on its own after the finish (below)
        pass

    def record_with_finish(batch: Batch, receipt: RunReceipt) -> None:
        finished.clear()
        receipts.pending_ids.clear()
        if concluded is None:
            return
        try:
            final = dataclasses.replace(
                concluded,
                persona_runtime=list(concluded.persona_runtime),
                warnings=list(concluded.warnings),
            )
            final.finish = receipt.to_dict()
            state = render_status(batch.state(name), runtime.spec(name), batch.at)
            finished_at = _snapshot(state.to_dict(), "finished")
            final.persona_runtime.append(finished_at)
            record = {
                **early,
                "finish": _jsonable(final.finish),
                "persona_runtime": [*early["persona_runtime"], _jsonable(finished_at)],
            }
            events: list[tuple[str, dict[str, Any]]] = []
            if transcript is not None:
                events.append((RunKind.RUN_TRANSCRIPT, transcript))
            events.append((RunKind.RUN_RECORDED, {"record": record}))
        except Exception:  # the record is written on its own after the finish (below)
            return
        for kind, payload in events:
            receipts.emit(batch, kind, payload)
        finished.append(final)

    try:
        finish = runtime.finish_run(
            name,
            run_id,
            at=clock(),
            cost_usd=budget.run_usd,
            tokens=budget.run_tokens,
            error=None if status == "completed" else (error or status),
            also=record_with_finish,
        )
        result.finish = finish.to_dict()
    except RunError as exc:  # pragma: no cover - defensive
        finished.clear()
        result.warnings.append(str(exc))
    except Exception as exc:  # lease expired meanwhile, unknown run
        finished.clear()
        result.warnings.append(f"could not finish run {run_id}: {exc}")
        if status == "completed":
            status, error = "failed", str(exc)

    if finished:
        result = finished[0]
        receipts.committed()
        recorded = True
    else:
        _conclude(result, status, error, control, receipts, budget)
        result.persona_runtime.append(runtime_snapshot(session, name, clock(), "finished"))
        if control.transcripts:
            try:
                receipts.mechanism(RunKind.RUN_TRANSCRIPT, {"agents": control.transcripts})
            except ReceiptError as exc:
                result.warnings.append(str(exc))
        try:
            receipts.mechanism(RunKind.RUN_RECORDED, {"record": result.record()})
            recorded = True
        except ReceiptError as exc:
            result.warnings.append(str(exc))
            recorded = False
    if recorded:
        demoted = promotion.check_demotion(runtime, persona, clock())
        if demoted is not None:
            result.warnings.append(
                f"{name} demoted from {demoted['from']} to {demoted['to']}: {demoted['reason']}"
            )
    return result


@contextlib.contextmanager
def _keep_lease(
    session: Session,
    control: RunControl,
    name: str,
    run_id: str,
    ttl: float,
    clock: Callable[[], datetime],
) -> Iterator[LeaseKeeper]:
    """Renew the run's lease while the workflow runs (charter.run.leases): from a thread on
    a connection of its own when the session owns its log, else only before each call."""
    options = session.options

    def open_log() -> EventLog:
        return open_event_log(state_dir=options.state_dir, url=options.state_url, env=options.env)

    keeper = LeaseKeeper(
        session.runtime,
        name,
        run_id,
        ttl_seconds=ttl,
        clock=clock,
        open_log=open_log if session.owns_log else None,
    )
    control.lease = keeper
    try:
        with keeper:
            yield keeper
    finally:
        control.lease = None


def _conclude(
    result: RunResult,
    status: str,
    error: str | None,
    control: RunControl,
    receipts: ReceiptLog,
    budget: LiveBudget,
) -> None:
    """What the run did, into its result (before the record is taken of it)."""
    result.status = status
    result.error = error
    result.tool_calls = _jsonable(control.tool_calls)
    result.dry_runs = _jsonable(control.dry_runs)
    result.proposals = _jsonable(control.proposals)
    result.denied = _jsonable(control.denied)
    result.approvals = _jsonable(control.approvals)
    result.receipts = _jsonable(receipts.receipts)
    result.budget = budget.to_dict()
    result.warnings.extend(budget.warnings + receipts.warnings)


def _park(
    session: Session,
    persona: Persona,
    result: RunResult,
    control: RunControl,
    envelope: TriggerEnvelope,
    inbox_item: Mapping[str, Any] | None,
    waiting: RunParked,
) -> RunResult:
    """Record what resuming needs and give the lease back (charter.run.parking)."""
    clock = session.options.clock()
    control.journal.run_usd = control.budget.run_usd
    control.journal.run_tokens = control.budget.run_tokens
    payload = {
        "approval_id": waiting.approval_id,
        "call_id": waiting.call_id,
        "tool": waiting.tool,
        "envelope": envelope.to_dict(),
        "inbox_item": _jsonable(dict(inbox_item)) if inbox_item is not None else None,
        "journal": _jsonable(control.journal.to_dict()),
    }
    assert result.run_id is not None
    session.runtime.park_run(persona.name, result.run_id, at=clock(), payload=payload)
    result.status = "parked"
    result.error = None
    result.approvals = _jsonable(control.approvals)
    result.tool_calls = _jsonable(control.tool_calls)
    result.warnings.append(
        f"parked: waiting for approval {waiting.approval_id} ({waiting.tool}); "
        f"charter approve {result.run_id} {waiting.call_id} resumes it"
    )
    result.persona_runtime.append(runtime_snapshot(session, persona.name, clock(), "parked"))
    return result


def resume_parked_in_session(session: Session, name: str) -> list[RunResult]:
    """Take up every parked run of ``name`` whose approval has been decided (replay)."""
    persona = session.runnable_persona(name)
    runtime = session.runtime
    results: list[RunResult] = []
    for parked in list(runtime.state(name).parked.values()):
        if decided(session.log, name, parked["approval_id"]) is None:
            continue  # still waiting: an approval never expires into an allow
        stored = session.log.read(after=int(parked["event_id"]) - 1, limit=1)
        if not stored or stored[0].kind != Kind.RUN_PARKED:
            continue
        data = stored[0].payload
        receipt = runtime.unpark_run(name, parked["run_id"], at=session.options.clock()())
        if receipt is None:
            break  # at max_concurrency: the run stays parked until a lease frees
        envelope = TriggerEnvelope.from_dict(data["envelope"])
        results.append(
            execute_admitted(
                session,
                persona,
                receipt,
                envelope,
                data.get("inbox_item"),
                replay=data.get("journal") or {},
                running=True,  # RUN_UNPARKED marks it running, under a fresh lease
            )
        )
    return results


def _lease_fresh(admission: RunReceipt, now: datetime, ttl: float) -> bool:
    """Whether less than a heartbeat interval (a third of the TTL, as ``durable_wait``
    renews) has passed since the lease was taken (a drain admits each item at its own
    start time, so a later item's lease may be old by the time it runs)."""
    if admission.lease is None:
        return False
    remaining = (parse_time(admission.lease.expires_at) - now).total_seconds()
    return remaining >= ttl * 2 / 3


def _heartbeat(runtime: Any, name: str, run_id: str, at: datetime) -> None:
    runtime.heartbeat(name, run_id, at=at)


def _not_admitted(
    receipt: RunReceipt, envelope: TriggerEnvelope, session: Session, at: datetime
) -> RunResult:
    result = RunResult(
        status=receipt.status.value,
        persona=receipt.persona,
        work_key=receipt.work_key,
        run_id=receipt.run_id,
        admission=receipt.to_dict(),
        trigger=envelope.to_dict(),
        error=receipt.error,
    )
    if receipt.status is ReceiptStatus.BUDGET_EXHAUSTED:
        result.budget_stop = {
            "receipt_id": receipt.budget_receipt_id,
            "reason": receipt.exhaustion_reason,
            "during_run": False,
            "message": receipt.error,
        }
    result.persona_runtime.append(runtime_snapshot(session, receipt.persona, at, "refused"))
    return result


def run_in_session(
    session: Session,
    name: str,
    *,
    provider: str | None = None,
    kind: str | None = None,
    metadata: Mapping[str, str] | None = None,
    payload: Mapping[str, Any] | None = None,
    schedule: bool = False,
    work_key: str | None = None,
) -> RunResult:
    """Admit one unit of work for ``name`` and, when admitted, run its entry workflow.

    With the ``otel`` extra the run is an ``invoke_agent {name}`` span.
    """
    from charter.agent import telemetry

    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
    with telemetry.span(f"invoke_agent {name}", attributes) as current:
        result = _run_in_session(
            session, name, provider=provider, kind=kind, metadata=metadata, payload=payload,
            schedule=schedule, work_key=work_key,
        )  # fmt: skip
        telemetry.annotate(
            current,
            {
                "gen_ai.agent.id": result.run_id,
                "charter.run.status": result.status,
                "charter.run.work_key": result.work_key,
            },
        )
        if not result.ok:
            telemetry.error(current, result.status)
        return result


def _run_in_session(
    session: Session,
    name: str,
    *,
    provider: str | None,
    kind: str | None,
    metadata: Mapping[str, str] | None,
    payload: Mapping[str, Any] | None,
    schedule: bool,
    work_key: str | None,
) -> RunResult:
    persona = session.runnable_persona(name)
    runtime = session.runtime
    options = session.options
    at = options.clock()()
    stamp = format_time(at)
    if provider is not None:
        # a trigger may report the outcome of earlier proposals on its work key (issue 18)
        promotion.observe_trigger(
            runtime,
            list(session.manifest.personas),
            provider=provider,
            kind=kind,
            metadata=metadata,
            payload=payload,
            at=at,
        )
        receipt = runtime.trigger(
            name,
            provider=provider,
            kind=kind,
            at=at,
            metadata=metadata,
            payload=payload,
            force=options.force,
            hold=True,
            rerun=at.strftime("%Y%m%dT%H%M%S%fZ") if options.rerun else None,
        )
        envelope = TriggerEnvelope(
            "trigger",
            receipt.work_key or "",
            stamp,
            provider,
            kind or _started_kind(session, name, receipt),
            dict(_started_metadata(session, name, receipt, metadata)),
            dict(payload) if payload is not None else None,
        )
    elif schedule:
        receipt = runtime.tick(name, at=at, work_key=work_key, hold=True)
        envelope = TriggerEnvelope("schedule", receipt.work_key or "", stamp)
    else:
        key = work_key or f"manual:{name}:{at.strftime('%Y-%m-%dT%H:%MZ')}"
        receipt = runtime.submit(name, WorkItem(key, "manual"), at=at, hold=True)
        envelope = TriggerEnvelope("manual", key, stamp)
    if receipt.status is not ReceiptStatus.STARTED:
        result = _not_admitted(receipt, envelope, session, at)
        if receipt.status is ReceiptStatus.DUPLICATE:
            result.error = _duplicate_message(session, name, receipt, provider is not None)
    else:
        result = execute_admitted(session, persona, receipt, envelope)
    if receipt.status in (ReceiptStatus.STARTED, ReceiptStatus.QUEUED):
        # a lease was released (or the work joined a queue whose head may now fit):
        # run what waits at max_concurrency, oldest first, in this process
        result.drained = [_drained_summary(r) for r in drain_in_session(session, name)]
    return result


def _drained_summary(result: RunResult) -> dict[str, Any]:
    return {
        "run_id": result.run_id,
        "work_key": result.work_key,
        "status": result.status,
        "error": result.error,
    }


def _duplicate_message(session: Session, name: str, receipt: RunReceipt, trigger: bool) -> str:
    """Why nothing ran: the work key's earlier run, and whether charter ran it or it was
    only recorded (``persona tick/trigger/spend`` record work done elsewhere)."""
    ran = any(
        e.kind == RunKind.RUN_RECORDED and e.payload.get("run_id") == receipt.run_id
        for e in session.log.iter_all(persona=name)
    )
    how = (
        "already run by charter persona run"
        if ran
        else "only recorded by charter persona trigger/tick/spend (nothing ran here)"
    )
    hint = (
        "to run the workflow for it anyway, add --rerun (a new work key "
        f"{receipt.work_key}#rerun:<time>)"
        if trigger
        else "give another --work-key to run it again"
    )
    return f"duplicate: {receipt.work_key} was {how} as {receipt.run_id}; {hint}"


def _started_event(session: Session, name: str, receipt: RunReceipt) -> dict[str, Any]:
    ids = set(receipt.event_ids)
    for event in session.log.read(after=min(ids) - 1 if ids else 0, persona=name):
        if event.event_id in ids and event.kind == Kind.RUN_STARTED:
            return dict(event.payload)
    return {}


def _started_kind(session: Session, name: str, receipt: RunReceipt) -> str | None:
    value = _started_event(session, name, receipt).get("kind")
    return str(value) if value else None


def _started_metadata(
    session: Session, name: str, receipt: RunReceipt, given: Mapping[str, str] | None
) -> Mapping[str, str]:
    data = _started_event(session, name, receipt).get("metadata")
    return data if isinstance(data, dict) else dict(given or {})


def run_handoff_in_session(session: Session, name: str, handoff_id: str) -> RunResult:
    """Run an inbox handoff; its ``policy_override`` replaces the persona's policy."""
    persona = session.runnable_persona(name)
    runtime = session.runtime
    at = session.options.clock()()
    item = next((h for h in runtime.state(name).inbox if h["handoff_id"] == handoff_id), None)
    if item is None:
        raise RunError(f"{name}: no handoff {handoff_id!r} in the inbox")
    receipt = runtime.accept_handoff(name, handoff_id, at=at, hold=True)
    envelope = TriggerEnvelope(
        "handoff",
        receipt.work_key or f"handoff:{handoff_id}",
        format_time(at),
        kind=item.get("kind"),
        payload=item.get("payload") or {},
        handoff=item,
    )
    if receipt.status is not ReceiptStatus.STARTED:
        return _not_admitted(receipt, envelope, session, at)
    result = execute_admitted(session, persona, receipt, envelope, item)
    result.drained = [_drained_summary(r) for r in drain_in_session(session, name)]
    return result


def run_inbox_in_session(session: Session, name: str) -> list[RunResult]:
    """Run every handoff waiting in ``name``'s inbox, oldest first."""
    session.runnable_persona(name)
    items = list(session.runtime.state(name).inbox)
    return [run_handoff_in_session(session, name, h["handoff_id"]) for h in items]


@dataclass
class ResumeResult:
    control: dict[str, Any]
    runs: list[RunResult]

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.runs)

    def to_dict(self) -> dict[str, Any]:
        return {"control": self.control, "runs": [r.to_dict() for r in self.runs]}


def resume_in_session(session: Session, name: str) -> ResumeResult:
    """Resume a paused persona and run each queued item's workflow as it is drained."""
    clock = session.options.clock()
    at = clock()
    runs: list[RunResult] = []
    execute = _queue_executor(session, name, clock, runs)
    control = session.runtime.resume(name, at=at, execute=execute, clock=clock)
    return ResumeResult(control.to_dict(), runs)


def drain_in_session(
    session: Session,
    name: str,
    *,
    more: Callable[[str], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> list[RunResult]:
    """Run the work queued at ``max_concurrency`` while leases are free (FIFO).
    ``more`` and ``stop``: as for ``PersonaRuntime.drain`` (serve wakes another worker
    with the one, and stops taking work on SIGTERM with the other)."""
    runs: list[RunResult] = []
    clock = session.options.clock()
    execute = _queue_executor(session, name, clock, runs)
    session.runtime.drain(name, at=clock(), execute=execute, clock=clock, more=more, stop=stop)
    return runs


def _journal_of_attempts(
    session: Session, name: str, item: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The journal of a retried item's earlier attempts (``None`` for a first attempt)."""
    prior = [str(r) for r in item.get("prior_runs") or ()]
    if not prior:
        return None
    # the earlier attempts began after the work was queued: read from there on
    after = max(0, int(item.get("body_event_id") or item.get("event_id") or 1) - 1)
    events = session.log.read(after=after, persona=name, kinds=JOURNAL_KINDS)
    return journal_of(events, prior).to_dict()


def _queue_executor(
    session: Session, name: str, clock: Callable[[], datetime], runs: list[RunResult]
) -> Callable[[RunReceipt, dict[str, Any]], RunReceipt]:
    """Run a drained queue item's entry workflow, collecting its result in ``runs``."""
    persona = session.runnable_persona(name)

    def execute(receipt: RunReceipt, item: dict[str, Any]) -> RunReceipt:
        if item.get("provider"):
            # as for a trigger run directly: it may settle earlier proposals (issue 18)
            promotion.observe_trigger(
                session.runtime,
                list(session.manifest.personas),
                provider=str(item["provider"]),
                kind=item.get("kind"),
                metadata=dict(item.get("metadata") or {}),
                payload=item.get("body"),
                at=session.options.clock()(),
            )
        handed: dict[str, Any] | None = None
        if item.get("handoff_id") and isinstance(item.get("body"), dict):
            # a handoff that waited at max_concurrency: its inbox item went with it
            handed = dict(item["body"])
            envelope = TriggerEnvelope(
                "handoff",
                receipt.work_key or item["work_key"],
                format_time(clock()),
                kind=handed.get("kind"),
                payload=handed.get("payload") or {},
                handoff=handed,
            )
        else:
            envelope = TriggerEnvelope(
                "queue",
                receipt.work_key or item["work_key"],
                format_time(clock()),
                item.get("provider"),
                item.get("kind"),
                dict(item.get("metadata") or {}),
                item.get("body"),
            )
        # a retry after an earlier attempt's process died: that attempt's journal is
        # replayed (tool results and model responses recorded as they happened)
        replay = _journal_of_attempts(session, name, item)
        # drain/resume admitted it running (see PersonaRuntime._drain_one)
        result = execute_admitted(
            session, persona, receipt, envelope, handed, replay=replay, running=True
        )
        runs.append(result)
        fin = result.finish or {}
        return dataclasses.replace(
            receipt,
            status=ReceiptStatus.COMPLETED
            if result.status == "completed"
            else ReceiptStatus.FAILED,
            error=result.error,
            event_ids=tuple(receipt.event_ids) + tuple(fin.get("event_ids") or ()),
        )

    return execute


# -- one-call API -------------------------------------------------------------------


def run_persona(
    name: str,
    *,
    provider: str | None = None,
    kind: str | None = None,
    metadata: Mapping[str, str] | None = None,
    payload: Mapping[str, Any] | None = None,
    handoff_id: str | None = None,
    schedule: bool = False,
    work_key: str | None = None,
    options: RunOptions | None = None,
) -> RunResult:
    """Wake ``name`` (a trigger, a schedule, an inbox handoff, or by hand) and run it.

    Admission is the runtime's (pause, disable, lease, duplicate, budget); an admitted run
    executes the persona's entry workflow in-process under its charter. Raises
    :class:`RunError` for bad input (unknown persona, invalid manifest).
    """
    with session_scope(options or RunOptions()) as session:
        if handoff_id is not None:
            return run_handoff_in_session(session, name, handoff_id)
        return run_in_session(
            session,
            name,
            provider=provider,
            kind=kind,
            metadata=metadata,
            payload=payload,
            schedule=schedule,
            work_key=work_key,
        )


def resume_persona(name: str, *, options: RunOptions | None = None) -> ResumeResult:
    with session_scope(options or RunOptions()) as session:
        return resume_in_session(session, name)


def _daemon_dir(session: Session) -> Path:
    """Daemons live beside the SQLite state (``<state dir>/daemons``), else in the pack."""
    path = getattr(session.log, "path", None)
    if isinstance(path, Path):
        return path.parent / "daemons"
    return session.base / ".charter" / "daemons"


def _user_callback(user: Any) -> Any:
    if user is None:
        return None
    from charter.agent.simusers import answer_callback

    return answer_callback(user)


def interactive_approver() -> InteractiveApprover:
    return InteractiveApprover()


__all__ = [
    "OK_STATUSES",
    "ResumeResult",
    "RunResult",
    "execute_admitted",
    "interactive_approver",
    "resume_in_session",
    "resume_persona",
    "run_handoff_in_session",
    "run_in_session",
    "run_inbox_in_session",
    "run_persona",
    "runtime_snapshot",
]
