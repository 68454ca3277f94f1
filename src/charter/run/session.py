"""A run session: the validated manifest, the runtime over the event log, the price table."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from charter.manifest import Manifest, ManifestError, Persona, load_manifest
from charter.runtime import (
    BudgetSpec,
    EventLog,
    HandoffRoute,
    IdFactory,
    PersonaRuntime,
    PersonaRuntimeSpec,
    RouteRule,
    StateCache,
    open_event_log,
)
from charter.runtime.clock import utc_now

from .approvals import Approver
from .errors import ForeignWorkflow, ManifestInvalid, RunError, UnknownPersona
from .prices import PriceTable, load_prices

LLM_ENV = "CHARTER_LLM"


@dataclass
class RunOptions:
    """How runs are executed (everything optional; defaults are the embedded ones).

    ``at`` freezes the clock (all events at that time); ``llm`` is the agent provider
    (``mock``, ``mock:script.json``, ``openai``, ``anthropic``, ``ollama``; default
    ``$CHARTER_LLM`` or ``mock``); ``model`` overrides ``model_policy.default_model``;
    ``tier`` lowers the autonomy tier for the run; ``approver`` decides approvals locally
    (else a durable approval in the log is awaited for ``approval_timeout`` seconds,
    ``None`` = until decided); ``elapsed`` measures runtime for ``max_runtime_seconds``.
    """

    manifest: str | Path | None = None
    state_dir: str | Path | None = None
    state_url: str | None = None
    env: Mapping[str, str] | None = None
    at: datetime | None = None
    llm: Any = None
    model: str | None = None
    tier: str | None = None
    approver: Approver | None = None
    approval_timeout: float | None = None
    workspace: str | Path | None = None
    ids: IdFactory | None = None
    elapsed: Callable[[], float] | None = None
    force: bool = False
    rerun: bool = False  # run a trigger's work key again (``<key>#rerun:<time>``)
    holder: str = "charter-run"
    # serve: a run waiting for an approval parks (gives its lease back) instead of
    # blocking; it resumes by replay once decided (charter.run.parking)
    park_approvals: bool = False
    notify: Callable[[str], None] = field(default=lambda _message: None)
    # a simulated user (charter.agent.simusers.Answerer) answering the run's ask_user tool
    # (persona evals); None: ask_user reports that no user is attached
    user: Any = None
    log: EventLog | None = None  # an already open log (tests, serve)
    # persona states shared by the sessions opened with these options (serve: every
    # thread of a replica reads a persona's new events once, not once per thread)
    state_cache: StateCache | None = None

    def clock(self) -> Callable[[], datetime]:
        at = self.at
        if at is not None:
            return lambda: at
        return utc_now

    def provider_spec(self) -> Any:
        if self.llm is not None:
            return self.llm
        environ = os.environ if self.env is None else self.env
        return environ.get(LLM_ENV) or "mock"


@dataclass
class Session:
    manifest: Manifest
    runtime: PersonaRuntime
    prices: PriceTable
    options: RunOptions
    base: Path
    owns_log: bool = True
    # personas left out because their own declaration has errors (the others still run)
    invalid: dict[str, tuple[ManifestError, ...]] = field(default_factory=dict)

    @property
    def log(self) -> EventLog:
        return self.runtime.log

    def persona(self, name: str) -> Persona:
        persona = self.manifest.get(name)
        if persona is None and name in self.invalid:
            errors = "\n".join(str(err) for err in self.invalid[name])
            raise ManifestInvalid(f"persona {name!r} does not validate:\n{errors}")
        if persona is None:
            known = ", ".join(self.manifest.names) or "none"
            raise UnknownPersona(f"unknown persona {name!r}; known personas: {known}")
        return persona

    def runnable_persona(self, name: str) -> Persona:
        """:meth:`persona`, refusing one whose entry workflow is for another host before
        any work is admitted (:class:`ForeignWorkflow`)."""
        persona = self.persona(name)
        if not persona.entry_workflow.runnable:
            raise ForeignWorkflow(f"persona {name!r}: {persona.entry_workflow.foreign_message}")
        return persona

    def close(self) -> None:
        if self.owns_log:
            self.runtime.log.close()


def runtime_specs(
    manifest: Manifest,
) -> tuple[dict[str, PersonaRuntimeSpec], tuple[HandoffRoute, ...]]:
    """The runtime's view of a validated manifest."""
    personas = {
        p.name: PersonaRuntimeSpec(
            name=p.name,
            version=p.version,
            triggers=tuple(str(t) for t in p.triggers),
            schedules=p.schedules,
            budget=BudgetSpec(
                daily_usd=p.budget.daily_usd,
                hourly_usd=p.budget.hourly_usd,
                run_usd=p.budget.run_usd,
                max_tokens=p.budget.max_tokens,
            ),
            handoffs=tuple(str(h) for h in p.handoffs),
            **{k: v for k, v in dataclasses.asdict(p.runtime).items() if v is not None},
        )
        for p in manifest.personas
    }
    routes = tuple(
        HandoffRoute(
            id=r.id,
            kind=r.kind,
            from_persona=r.from_persona,
            rules=tuple(RouteRule(step.target.raw, step.when) for step in r.route),
        )
        for r in manifest.handoff_routes
    )
    return personas, routes


def load_checked_manifest(path: str | Path | None) -> Manifest:
    """The valid part of the manifest (see :func:`load_fleet_manifest`)."""
    return load_fleet_manifest(path)[0]


def load_fleet_manifest(
    path: str | Path | None,
) -> tuple[Manifest, dict[str, tuple[ManifestError, ...]]]:
    """The manifest without its invalid personas, and those personas' errors.

    Raises :class:`ManifestInvalid` for errors that belong to no single persona (syntax,
    routes, checks): then nothing runs. A persona whose own declaration is broken is
    left out and reported; the rest of the fleet still runs.
    """
    loaded = load_manifest(str(path) if path is not None else None)
    manifest, invalid = loaded.split_invalid()
    if not manifest.ok:
        raise ManifestInvalid("\n".join(str(err) for err in loaded.errors))
    if not manifest.personas and invalid:
        errors = [str(err) for errs in invalid.values() for err in errs]
        raise ManifestInvalid("\n".join(errors))
    if not manifest.personas:
        raise RunError("no personas found (pass --manifest PATH to a charter.toml)")
    return manifest, invalid


def open_session(options: RunOptions) -> Session:
    manifest, invalid = load_fleet_manifest(options.manifest)
    personas, routes = runtime_specs(manifest)
    base = Path(manifest.manifest_path).parent if manifest.manifest_path else Path.cwd()
    prices = load_prices(manifest.manifest_path)
    owns = options.log is None
    log = options.log or open_event_log(
        state_dir=options.state_dir, url=options.state_url, env=options.env
    )
    runtime = PersonaRuntime(
        log,
        personas,
        routes=routes,
        ids=options.ids,
        holder=options.holder,
        actor="charter-run",
        cache=options.state_cache,
    )
    return Session(manifest, runtime, prices, options, base, owns, invalid)


@contextmanager
def session_scope(options: RunOptions) -> Iterator[Session]:
    session = open_session(options)
    try:
        yield session
    finally:
        session.close()


__all__ = [
    "LLM_ENV",
    "RunOptions",
    "Session",
    "load_checked_manifest",
    "load_fleet_manifest",
    "open_session",
    "runtime_specs",
    "session_scope",
]
