"""The manifest vocabulary, declared once.

Both the validator (:mod:`charter.manifest.fields`) and the JSON Schema
(:mod:`charter.manifest.schema`) are driven by these tables, so the two cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Literal

from charter.policy import LEVEL_NAMES

Kind = Literal[
    "string",
    "strings",
    "number",
    "integer",
    "enum",
    "table",
    "tables",
    "policy",
    "mapping",
    "capability_set",
]


class AutonomyTier(StrEnum):
    """How much a persona may do without a human."""

    SHADOW = "shadow"
    SUGGEST = "suggest"
    ACT_WITH_APPROVAL = "act_with_approval"
    ACT_AUTO = "act_auto"


class ReceiptPolicy(StrEnum):
    """Whether a run must leave a receipt."""

    REQUIRED = "required"
    OPTIONAL = "optional"
    DISABLED = "disabled"


#: Rollout modes, most cautious first.
ROLLOUT_MODES: tuple[str, ...] = (
    "disabled",
    "shadow",
    "dry_run",
    "approval_only",
    "canary",
    "full",
)

#: ``model_policy.reasoning_effort`` (alias ``effort``): the agent loop's effort levels
#: (``charter.agent.reasoning.EFFORTS``; a test keeps the two equal). ``none`` turns
#: reasoning off; a level becomes the run's ``reasoning_policy`` (see :class:`ModelPolicy`).
REASONING_EFFORTS: tuple[str, ...] = ("none", "minimal", "low", "medium", "high", "xhigh")

#: Kinds of explicit ``[[triggers]]`` entries.
TRIGGER_KINDS: tuple[str, ...] = ("webhook", "schedule", "poll", "manual")

#: Route predicates every host understands; others must be declared as custom.
BUILTIN_PREDICATES: tuple[str, ...] = ("always", "budget_exhausted", "approval_denied")


@dataclass(frozen=True)
class Field:
    """One field of a table: its canonical name, aliases, type and constraints."""

    name: str
    kind: Kind
    doc: str
    required: bool = False
    aliases: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    table: TableSpec | None = None


@dataclass(frozen=True)
class TableSpec:
    """A table (TOML table / JSON object) with a closed set of fields."""

    name: str
    doc: str
    fields: tuple[Field, ...] = field(default=())

    @cached_property
    def lookup(self) -> dict[str, Field]:
        """Every accepted key (canonical names and aliases) to its field."""
        out: dict[str, Field] = {}
        for f in self.fields:
            out[f.name] = f
            for alias in f.aliases:
                out[alias] = f
        return out

    @cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    @cached_property
    def required(self) -> tuple[Field, ...]:
        """The fields that must be present."""
        return tuple(f for f in self.fields if f.required)


def _money(name: str, doc: str) -> Field:
    return Field(name, "number", doc, minimum=0)


BUDGET = TableSpec(
    "budget",
    "Cost, token, escalation and runtime ceilings.",
    (
        _money("daily_usd", "Spend ceiling per UTC day, in US dollars."),
        _money("hourly_usd", "Spend ceiling per hour, in US dollars."),
        _money("run_usd", "Spend ceiling per run, in US dollars."),
        Field("max_tokens", "integer", "Token ceiling per run.", minimum=0),
        Field(
            "frontier_escalations",
            "integer",
            "Escalations to the escalation model per day.",
            minimum=0,
        ),
        Field("max_runtime_seconds", "number", "Wall-clock ceiling per run.", minimum=0),
    ),
)

RUNTIME = TableSpec(
    "runtime",
    "Admission settings of the persona runtime: concurrency, lease TTL, duplicate window, "
    "attempts.",
    (
        Field(
            "max_concurrency",
            "integer",
            "Runs on different work keys at once (default 1); more work waits in a FIFO "
            "queue until a lease frees.",
            minimum=1,
        ),
        Field(
            "lease_ttl_seconds",
            "integer",
            "Seconds a run's lease lives without a heartbeat (default 300); a run whose "
            "process died is recovered as failed after it.",
            minimum=1,
        ),
        Field(
            "duplicate_window_seconds",
            "integer",
            "Seconds a completed work key is refused as a duplicate (default 86400).",
            minimum=0,
        ),
        Field(
            "max_attempts",
            "integer",
            "Attempts of a piece of work whose run's lease expired (its process died) "
            "before it is dead-lettered (default 3).",
            minimum=1,
        ),
        Field(
            "retry_backoff_seconds",
            "number",
            "Wait before the second attempt of such work, doubling per attempt (default 5).",
            minimum=0,
        ),
    ),
)

MODEL_POLICY = TableSpec(
    "model_policy",
    "Default, escalation and fallback model preferences.",
    (
        Field("default_model", "string", "Model used by default (keep it cheap)."),
        Field("escalation_model", "string", "Model used on explicit escalation."),
        Field("fallback_models", "strings", "Models tried in order when the default fails."),
        Field(
            "reasoning_effort",
            "enum",
            "Reasoning effort of the persona's model calls: none turns reasoning off, a "
            "level is the agent loop's reasoning_policy (a call's own reasoning_effort or "
            "thinking still wins).",
            aliases=("effort",),
            choices=REASONING_EFFORTS,
        ),
    ),
)

PROMOTION = TableSpec(
    "promotion",
    "Criteria the receipts must meet before `charter persona promote` raises the tier; "
    "breaching one in the window demotes it one step.",
    (
        Field("min_runs", "integer", "Runs in the window before promotion.", minimum=0),
        Field(
            "min_agreement",
            "number",
            "Lower bound of the agreement rate's 95% Wilson interval (0..1).",
            minimum=0,
            maximum=1,
        ),
        Field("max_denials_per_run", "number", "Policy denials per run (mean) allowed.", minimum=0),
        Field("max_cost_per_run", "number", "Mean USD per run allowed.", minimum=0),
        Field("window", "string", "How far back evidence counts: 30d, 12h, 2w (default 30d)."),
        Field(
            "max_disagreement_streak",
            "integer",
            "Consecutive disagreements that demote (default 5).",
            minimum=1,
        ),
    ),
)

ROLLOUT_POLICY = TableSpec(
    "rollout_policy",
    "Rollout mode, percentage and cohorts.",
    (
        Field("mode", "enum", "Rollout mode.", choices=ROLLOUT_MODES),
        Field(
            "percentage",
            "number",
            "Share of work (stable hash of the work key into 100 buckets) that runs under the "
            "rollout mode; the rest runs at the persona's own tier.",
            minimum=0,
            maximum=100,
        ),
        Field(
            "cohorts",
            "strings",
            "KEY:VALUE selectors on trigger metadata (repository:org/repo, label:bug, "
            "author:alice, channel:C123), or named cohorts (merge-captain-v1: work whose "
            "metadata says cohort=merge-captain-v1; with names only, all work without a "
            "cohort in its metadata belongs to the first); only matching work is in the "
            "rollout.",
        ),
        Field("promotion", "table", PROMOTION.doc, table=PROMOTION),
    ),
)

PACKAGE_SOURCE = TableSpec(
    "package_source",
    "Package / path / git provenance of the persona.",
    (
        Field("package", "string", "Package name."),
        Field("version", "string", "Package version."),
        Field("path", "string", "Path inside the package or repository."),
        Field("git", "string", "Git URL."),
        Field("rev", "string", "Git revision."),
    ),
)

ON_EXIT = TableSpec(
    "on_exit",
    "Transition hints recorded with the stage receipt (the workflow routes, not the runtime).",
    (
        Field("on_complete", "string", "Stage that follows on success."),
        Field("on_failure", "string", "Stage that follows on failure."),
    ),
)

STAGE = TableSpec(
    "stage",
    "A step of the persona's workflow with its own, tighter tool surface.",
    (
        Field("name", "string", "Matches a step of the entry workflow.", required=True),
        Field(
            "allowed_tools",
            "strings",
            "Tool allowlist for the stage; omit to inherit the persona's tools; [] denies all.",
        ),
        Field(
            "side_effect_level", "enum", "Side-effect ceiling for the stage.", choices=LEVEL_NAMES
        ),
        Field(
            "max_iterations", "integer", "Agent-loop iteration cap.", minimum=1, maximum=2**32 - 1
        ),
        Field("on_exit", "table", "Transition hints.", table=ON_EXIT),
    ),
)

PERSONA = TableSpec(
    "persona",
    "A durable operational role: what it owns, when it wakes, what it may touch and spend.",
    (
        Field("name", "string", "Stable persona id.", required=True),
        Field("version", "string", "Persona contract version."),
        Field("description", "string", "Human-readable operational responsibility.", required=True),
        Field(
            "entry_workflow",
            "string",
            "Python target run when the persona executes: path/to/module.py:function or "
            "package.module:function; a harn workflow (path/file.harn#function) is accepted "
            "for another host, which `charter persona run` cannot execute.",
            required=True,
            aliases=("entry",),
        ),
        Field("tools", "strings", "Tools the persona may use (tools or capabilities required)."),
        Field("capabilities", "strings", "Host capabilities as namespace.operation."),
        Field(
            "autonomy_tier",
            "enum",
            "How much the persona may do without a human.",
            required=True,
            aliases=("autonomy", "tier"),
            choices=tuple(t.value for t in AutonomyTier),
        ),
        Field(
            "receipt_policy",
            "enum",
            "Whether runs must leave receipts.",
            required=True,
            aliases=("receipts",),
            choices=tuple(r.value for r in ReceiptPolicy),
        ),
        Field("triggers", "strings", "Events that wake the persona, as provider.event."),
        Field("schedules", "strings", "Cron expressions for recurring wakes."),
        Field(
            "handoffs",
            "strings",
            "Handoff targets: persona name, persona://name, human:group, worker://queue, "
            "a2a://endpoint.",
        ),
        Field("context_packs", "strings", "Named context bundles the role needs."),
        Field("evals", "strings", "Eval packs that measure the persona.", aliases=("eval_packs",)),
        Field("owner", "string", "Human or team owner."),
        Field("budget", "table", BUDGET.doc, table=BUDGET),
        Field("runtime", "table", RUNTIME.doc, table=RUNTIME),
        Field("model_policy", "table", MODEL_POLICY.doc, table=MODEL_POLICY),
        Field("rollout_policy", "table", ROLLOUT_POLICY.doc, table=ROLLOUT_POLICY),
        Field("package_source", "table", PACKAGE_SOURCE.doc, table=PACKAGE_SOURCE),
        Field("stages", "tables", "Per-stage tool scoping.", table=STAGE),
        Field(
            "policy",
            "policy",
            "Capability policy beyond tools: paths, network, commands, mcp_servers, skills, "
            "members, capabilities, side_effect_level, allow_sensitive.",
        ),
    ),
)

ROUTE_STEP = TableSpec(
    "route entry",
    "One candidate target of a handoff route.",
    (
        Field(
            "target",
            "string",
            "persona name, persona://name, human:group, worker://queue or a2a://endpoint.",
            required=True,
        ),
        Field(
            "when",
            "string",
            "Predicate: always, budget_exhausted, approval_denied or a "
            "declared custom predicate (default always).",
        ),
        Field(
            "policy_override",
            "policy",
            "Policy that replaces the receiver's policy for the handoff run.",
        ),
    ),
)

HANDOFF_ROUTE = TableSpec(
    "handoff route",
    "Tenant route data for typed handoffs.",
    (
        Field("id", "string", "Route id.", required=True),
        Field("kind", "string", "Handoff artifact kind (e.g. merge_receipt)."),
        Field("from", "string", "Persona that emits the handoff.", required=True),
        Field("route", "tables", "Candidate targets, in order.", required=True, table=ROUTE_STEP),
        Field("custom_predicates", "strings", "Predicate names resolved by persona code."),
    ),
)

TRIGGER_MATCH = TableSpec(
    "trigger match",
    "Which events of the provider fire the trigger.",
    (
        Field("events", "strings", "Event kinds (e.g. pr_opened)."),
        Field("metadata", "mapping", "Metadata that must match exactly (string values)."),
    ),
)

TRIGGER = TableSpec(
    "trigger",
    "An explicit trigger registration targeting a persona.",
    (
        Field("id", "string", "Trigger id.", required=True),
        Field("kind", "enum", "Trigger kind (default webhook).", choices=TRIGGER_KINDS),
        Field("provider", "string", "Event provider (github, linear, slack, ...)."),
        Field("match", "table", TRIGGER_MATCH.doc, table=TRIGGER_MATCH),
        Field("handler", "string", "persona://name (or a persona name).", required=True),
        Field("schedule", "string", "Cron expression (kind = schedule)."),
    ),
)

CHECK = TableSpec(
    "check",
    "Validation settings.",
    (
        Field(
            "host_capabilities",
            "capability_set",
            "Extra host capabilities: a list of namespace.operation, or a table "
            "namespace = [operations].",
        ),
        Field(
            "host_capabilities_path",
            "string",
            "File (JSON, TOML or one name per line) listing extra host capabilities.",
        ),
        Field("custom_predicates", "strings", "Route predicates every route may use."),
    ),
)

MANIFEST = TableSpec(
    "manifest",
    "charter.toml: personas, handoff routes, triggers and check settings.",
    (
        Field("personas", "tables", "Persona entries.", table=PERSONA),
        Field("handoff_routes", "tables", "Handoff routes.", table=HANDOFF_ROUTE),
        Field("triggers", "tables", "Explicit triggers.", table=TRIGGER),
        Field("check", "table", CHECK.doc, table=CHECK),
        Field(
            "persona_files",
            "strings",
            "Globs (relative to charter.toml) of standalone persona TOML files.",
        ),
    ),
)

#: Keys of persona.json in a persona folder (seed 004's portable vocabulary).
PERSONA_JSON_KEYS: tuple[str, ...] = ("defaults", "mcpServers", "policy", "sandbox", "include")
#: ``persona.json`` ``sandbox``: how ``charter launch`` wraps the CLI (charter.launch.sandboxing).
LAUNCH_SANDBOX_MODES: tuple[str, ...] = ("auto", "always", "never")
