"""The typed persona model every source (charter.toml, persona files, folders) produces."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

from charter.policy import Frame, Policy, Rules, mcp_tools_follow_servers

from .errors import ManifestError, ManifestWarning
from .spec import AutonomyTier, ReceiptPolicy
from .syntax import EntryWorkflow, HandoffTarget, TriggerName

if TYPE_CHECKING:
    from .workflow_model import HandoffRoute as HandoffRoute
    from .workflow_model import PackageSource as PackageSource
    from .workflow_model import Promotion as Promotion
    from .workflow_model import RouteStep as RouteStep
    from .workflow_model import Stage as Stage
    from .workflow_model import StageExit as StageExit
    from .workflow_model import TriggerBinding as TriggerBinding
    from .workflow_model import TriggerSpec as TriggerSpec

# defined in charter.manifest.workflow_model, loaded on first use (see there)
_WORKFLOW = frozenset(
    {
        "HandoffRoute",
        "PackageSource",
        "Promotion",
        "RouteStep",
        "Stage",
        "StageExit",
        "TriggerBinding",
        "TriggerSpec",
    }
)


def __getattr__(name: str) -> Any:
    if name in _WORKFLOW:
        from . import workflow_model

        return getattr(workflow_model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True, slots=True)
class Budget:
    """Ceilings; ``None`` means no ceiling of that kind."""

    daily_usd: float | None = None
    hourly_usd: float | None = None
    run_usd: float | None = None
    max_tokens: int | None = None
    frontier_escalations: int | None = None
    max_runtime_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class RuntimeSettings:
    """Admission settings; ``None`` keeps the runtime's default."""

    max_concurrency: int | None = None
    lease_ttl_seconds: int | None = None
    duplicate_window_seconds: int | None = None
    max_attempts: int | None = None
    retry_backoff_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class ModelPolicy:
    """Default / escalation / fallback models and the reasoning effort of their calls."""

    default_model: str | None = None
    escalation_model: str | None = None
    fallback_models: tuple[str, ...] = ()
    #: ``none`` | ``minimal`` | ``low`` | ``medium`` | ``high`` | ``xhigh`` (harn writes
    #: ``reasoning_effort`` or ``effort``); ``None``: the agent loop's own policy (auto)
    reasoning_effort: str | None = None

    def agent_options(self) -> dict[str, str]:
        """The agent-loop options the effort maps onto (``charter.agent.reasoning``).

        The persona's effort is a *policy*, not a caller's choice: it becomes
        ``reasoning_policy`` (``none`` -> ``off``), which the loop fits to what the model
        supports, and a workflow's own ``reasoning_effort`` / ``thinking`` on one call
        still wins over it.
        """
        if self.reasoning_effort is None:
            return {}
        if self.reasoning_effort == "none":
            return {"reasoning_policy": "off"}
        return {"reasoning_policy": self.reasoning_effort}


@dataclass(frozen=True, slots=True)
class RolloutPolicy:
    mode: str | None = None
    percentage: float | None = None
    #: ``KEY:VALUE`` filters on trigger metadata and named cohorts (bare names), as written
    cohorts: tuple[str, ...] = ()
    promotion: Promotion | None = None

    @property
    def named_cohorts(self) -> tuple[str, ...]:
        """The cohorts written as bare names (``merge-captain-v1``)."""
        return tuple(c for c in self.cohorts if ":" not in c)


SourceKind = Literal["manifest", "persona_file", "folder"]


@dataclass(frozen=True, slots=True)
class PersonaSource:
    """Where (part of) a persona came from, and what that source contributes."""

    kind: SourceKind
    path: str
    field_path: str = ""
    provides: str = "operational contract"
    shadowed: bool = False
    origin: str = ""  # for folders: "project", "CHARTER_PERSONA_PATHS" or "home"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": self.path,
            "field_path": self.field_path or None,
            "provides": self.provides,
            "origin": self.origin or None,
            "shadowed": self.shadowed,
        }


@dataclass(frozen=True, slots=True)
class Instructions:
    """A persona folder's instruction files and persona.json extras (seed 004)."""

    folder: str
    agents_md: str
    claude_md: str | None = None
    gemini_md: str | None = None
    persona_json: str | None = None
    defaults: dict[str, Any] = field(default_factory=dict)
    mcp_servers: dict[str, Any] = field(default_factory=dict)
    #: persona.json fragments pulled in by ``include`` (resolved paths, in merge order)
    includes: tuple[str, ...] = ()
    #: persona.json ``sandbox``: auto | always | never for ``charter launch`` (None: auto)
    sandbox: str | None = None

    def file_for(self, tool: str) -> str:
        """The instruction file a CLI reads: CLAUDE.md / GEMINI.md when present, else AGENTS.md."""
        key = tool.strip().lower()
        if key in ("claude", "claude-code") and self.claude_md:
            return self.claude_md
        if key in ("gemini", "gemini-cli") and self.gemini_md:
            return self.gemini_md
        return self.agents_md


@dataclass(frozen=True)
class Persona:
    """One persona, whatever it was declared in. Enum fields hold canonical values."""

    name: str
    description: str
    entry_workflow: EntryWorkflow
    autonomy_tier: AutonomyTier
    receipt_policy: ReceiptPolicy
    version: str | None = None
    tools: tuple[str, ...] | None = None
    capabilities: tuple[str, ...] | None = None
    triggers: tuple[TriggerName, ...] = ()
    schedules: tuple[str, ...] = ()
    handoffs: tuple[HandoffTarget, ...] = ()
    context_packs: tuple[str, ...] = ()
    evals: tuple[str, ...] = ()
    owner: str | None = None
    budget: Budget = Budget()
    runtime: RuntimeSettings = RuntimeSettings()
    model_policy: ModelPolicy = ModelPolicy()
    rollout_policy: RolloutPolicy = RolloutPolicy()
    package_source: PackageSource | None = None
    stages: tuple[Stage, ...] = ()
    policy: Policy | None = None
    folder_policy: Policy | None = None
    instructions: Instructions | None = None
    sources: tuple[PersonaSource, ...] = ()

    @property
    def manifest_source(self) -> str | None:
        """The file that owns the operational contract (first non-shadowed source)."""
        for source in self.sources:
            if not source.shadowed:
                return source.path
        return None

    @cached_property
    def effective_policy(self) -> Policy:
        """tools + capabilities + the ``policy`` table + the folder's policy, intersected.

        The MCP rule (:func:`charter.policy.mcp_tools_follow_servers`) is applied to each
        author's part on its own: the manifest entry (its ``tools`` and ``policy``), then
        the folder's ``persona.json``.
        """
        return self._policy_and_notes[0]

    @property
    def policy_notes(self) -> tuple[str, ...]:
        """How the MCP rule changed the persona's policy (for check, inspect, launch)."""
        return self._policy_and_notes[1]

    @cached_property
    def _policy_and_notes(self) -> tuple[Policy, tuple[str, ...]]:
        base = Policy(
            tools=Rules((self.tools,)) if self.tools is not None else Rules(),
            capabilities=Rules((self.capabilities,)) if self.capabilities is not None else Rules(),
        )
        if self.policy is not None:
            base = base.intersect(self.policy)
        base, notes = mcp_tools_follow_servers(base)
        if self.folder_policy is not None:
            folder, more = mcp_tools_follow_servers(self.folder_policy)
            base, notes = base.intersect(folder), notes + more
        return dataclasses.replace(base, name=f"persona:{self.name}"), notes

    def frame(self) -> Frame:
        """The persona's frame for the execution-policy stack."""
        return Frame(self.effective_policy, f"persona:{self.name}", "persona")

    def stage(self, name: str) -> Stage | None:
        return next((s for s in self.stages if s.name == name), None)

    def stage_frame(self, name: str) -> Frame:
        """The frame pushed while stage ``name`` runs; ``KeyError`` for an unknown stage."""
        stage = self.stage(name)
        if stage is None:
            raise KeyError(name)
        return Frame(stage.policy(self.name), f"stage:{self.name}/{name}", "stage", stage=name)


@dataclass(frozen=True, slots=True)
class ErrorScope:
    """Where one declared persona lives, so its errors can be told from the others'.

    An error belongs to ``persona`` when it is in ``manifest_path`` (or, for a folder,
    any file under it) at ``field_prefix`` or below it.
    """

    persona: str
    manifest_path: str
    field_prefix: str = ""
    folder: bool = False

    def owns(self, error: ManifestError) -> bool:
        if self.folder:
            inside = error.manifest_path == self.manifest_path or error.manifest_path.startswith(
                self.manifest_path.rstrip("/") + "/"
            )
        else:
            inside = error.manifest_path == self.manifest_path
        if not inside:
            return False
        prefix = self.field_prefix
        if not prefix:
            return True
        path = error.field_path
        return path == prefix or path.startswith((prefix + ".", prefix + "["))


@dataclass(frozen=True)
class Manifest:
    """Everything resolved for one project: personas, routes, triggers, and all errors."""

    manifest_path: str | None
    personas: tuple[Persona, ...] = ()
    handoff_routes: tuple[HandoffRoute, ...] = ()
    triggers: tuple[TriggerSpec, ...] = ()
    errors: tuple[ManifestError, ...] = ()
    #: valid constructs charter reads differently or cannot act on (``persona check``)
    warnings: tuple[ManifestWarning, ...] = ()
    persona_roots: tuple[tuple[str, str], ...] = ()  # (directory, origin), precedence order
    root: str | None = None
    scopes: tuple[ErrorScope, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.errors

    def persona_errors(self) -> dict[str, tuple[ManifestError, ...]]:
        """Errors that belong to one declared persona, by persona name."""
        out: dict[str, list[ManifestError]] = {}
        for error in self.errors:
            scope = next((s for s in self.scopes if s.owns(error)), None)
            if scope is not None:
                out.setdefault(scope.persona, []).append(error)
        return {name: tuple(errors) for name, errors in out.items()}

    def split_invalid(self) -> tuple[Manifest, dict[str, tuple[ManifestError, ...]]]:
        """The fleet view: this manifest without its invalid personas, and their errors.

        One broken persona must not stop the others: each error that belongs to a
        persona removes only that persona (and the routes it sends from). Errors that
        belong to no persona (syntax, routes, checks) stay on the returned manifest, so
        its ``ok`` still refuses everything when the project as a whole is broken.
        """
        invalid = self.persona_errors()
        if not invalid:
            return self, {}
        owned = {id(e) for errors in invalid.values() for e in errors}
        return (
            dataclasses.replace(
                self,
                personas=tuple(p for p in self.personas if p.name not in invalid),
                handoff_routes=tuple(
                    r for r in self.handoff_routes if r.from_persona not in invalid
                ),
                triggers=tuple(t for t in self.triggers if t.handler.value not in invalid),
                errors=tuple(e for e in self.errors if id(e) not in owned),
            ),
            invalid,
        )

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.personas)

    def get(self, name: str) -> Persona | None:
        """The persona called ``name``, if any."""
        return next((p for p in self.personas if p.name == name), None)

    def routes_from(self, name: str) -> tuple[HandoffRoute, ...]:
        return tuple(r for r in self.handoff_routes if r.from_persona == name)

    def trigger_bindings(self, name: str | None = None) -> tuple[TriggerBinding, ...]:
        """Every (provider, event) -> persona binding, optionally for one persona."""
        from .workflow_model import TriggerBinding

        out: list[TriggerBinding] = []
        for persona in self.personas:
            if name is None or persona.name == name:
                out.extend(
                    TriggerBinding(t.provider, t.event, persona.name, "persona")
                    for t in persona.triggers
                )
        for trig in self.triggers:
            if trig.handler.kind != "persona" or (name is not None and trig.handler.value != name):
                continue
            out.extend(
                TriggerBinding(trig.provider or trig.kind, event, trig.handler.value, trig.id)
                for event in trig.events
            )
        return tuple(out)
