"""charter.manifest: personas from charter.toml, persona files and ``.personas/`` folders.

Every source produces the same typed :class:`Persona`. :func:`load_manifest` finds and
validates everything and never raises for bad input: each problem is a
:class:`ManifestError` ``{manifest_path, field_path, message}`` in ``Manifest.errors``.
"""

from .capabilities import DEFAULT_HOST_CAPABILITIES, CapabilitySurface
from .cron import cron_error, next_fire
from .discovery import FOLDER_ROOT_NAME, MANIFEST_NAME, PATHS_ENV, find_manifest
from .errors import ManifestError
from .folders import FOLDER_AUTONOMY, FOLDER_ENTRY_WORKFLOW, FOLDER_RECEIPTS
from .loader import load_manifest
from .model import (
    Budget,
    ErrorScope,
    HandoffRoute,
    Instructions,
    Manifest,
    ModelPolicy,
    PackageSource,
    Persona,
    PersonaSource,
    Promotion,
    RolloutPolicy,
    RouteStep,
    RuntimeSettings,
    Stage,
    StageExit,
    TriggerBinding,
    TriggerSpec,
)
from .render import manifest_to_dict, persona_to_dict
from .rollout import COHORT_KEYS, cohort_keys, parse_cohort, parse_window
from .schema import manifest_schema
from .spec import BUILTIN_PREDICATES, ROLLOUT_MODES, AutonomyTier, ReceiptPolicy
from .syntax import EntryWorkflow, HandoffTarget, TriggerName, parse_target

__all__ = [
    "BUILTIN_PREDICATES",
    "COHORT_KEYS",
    "DEFAULT_HOST_CAPABILITIES",
    "ErrorScope",
    "FOLDER_AUTONOMY",
    "FOLDER_ENTRY_WORKFLOW",
    "FOLDER_RECEIPTS",
    "FOLDER_ROOT_NAME",
    "MANIFEST_NAME",
    "PATHS_ENV",
    "ROLLOUT_MODES",
    "AutonomyTier",
    "Budget",
    "CapabilitySurface",
    "EntryWorkflow",
    "HandoffRoute",
    "HandoffTarget",
    "Instructions",
    "Manifest",
    "ManifestError",
    "ModelPolicy",
    "PackageSource",
    "Persona",
    "PersonaSource",
    "Promotion",
    "ReceiptPolicy",
    "RolloutPolicy",
    "RouteStep",
    "RuntimeSettings",
    "Stage",
    "StageExit",
    "TriggerBinding",
    "TriggerName",
    "TriggerSpec",
    "cohort_keys",
    "cron_error",
    "find_manifest",
    "load_manifest",
    "manifest_schema",
    "manifest_to_dict",
    "next_fire",
    "parse_cohort",
    "parse_target",
    "parse_window",
    "persona_to_dict",
]
