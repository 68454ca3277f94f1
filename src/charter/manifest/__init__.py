"""charter.manifest: personas from charter.toml, persona files and ``.personas/`` folders.

Every source produces the same typed :class:`Persona`. :func:`load_manifest` finds and
validates everything and never raises for bad input: each problem is a
:class:`ManifestError` ``{manifest_path, field_path, message}`` in ``Manifest.errors``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from charter._lazy import lazy_exports

if TYPE_CHECKING:
    from .capabilities import DEFAULT_HOST_CAPABILITIES, CapabilitySurface
    from .cron import cron_error, next_fire
    from .discovery import FOLDER_ROOT_NAME, MANIFEST_NAME, PATHS_ENV, find_manifest
    from .errors import ManifestError
    from .folders import FOLDER_AUTONOMY, FOLDER_ENTRY_WORKFLOW, FOLDER_RECEIPTS
    from .loader import load_manifest
    from .model import (
        Budget,
        ErrorScope,
        Instructions,
        Manifest,
        ModelPolicy,
        Persona,
        PersonaSource,
        RolloutPolicy,
        RuntimeSettings,
    )
    from .render import manifest_to_dict, persona_to_dict
    from .rollout import COHORT_KEYS, cohort_keys, parse_cohort, parse_window
    from .schema import manifest_schema
    from .spec import BUILTIN_PREDICATES, ROLLOUT_MODES, AutonomyTier, ReceiptPolicy
    from .syntax import EntryWorkflow, HandoffTarget, TriggerName, parse_target
    from .workflow_model import (
        HandoffRoute,
        PackageSource,
        Promotion,
        RouteStep,
        Stage,
        StageExit,
        TriggerBinding,
        TriggerSpec,
    )

# Names are imported on first use: importing one submodule (charter.manifest.discovery)
# does not load the loader, the model and the policy language with it.
_LAZY = {
    "DEFAULT_HOST_CAPABILITIES": "capabilities",
    "CapabilitySurface": "capabilities",
    "cron_error": "cron",
    "next_fire": "cron",
    "FOLDER_ROOT_NAME": "discovery",
    "MANIFEST_NAME": "discovery",
    "PATHS_ENV": "discovery",
    "find_manifest": "discovery",
    "ManifestError": "errors",
    "FOLDER_AUTONOMY": "folders",
    "FOLDER_ENTRY_WORKFLOW": "folders",
    "FOLDER_RECEIPTS": "folders",
    "load_manifest": "loader",
    "Budget": "model",
    "ErrorScope": "model",
    "HandoffRoute": "workflow_model",
    "Instructions": "model",
    "Manifest": "model",
    "ModelPolicy": "model",
    "PackageSource": "workflow_model",
    "Persona": "model",
    "PersonaSource": "model",
    "Promotion": "workflow_model",
    "RolloutPolicy": "model",
    "RouteStep": "workflow_model",
    "RuntimeSettings": "model",
    "Stage": "workflow_model",
    "StageExit": "workflow_model",
    "TriggerBinding": "workflow_model",
    "TriggerSpec": "workflow_model",
    "manifest_to_dict": "render",
    "persona_to_dict": "render",
    "COHORT_KEYS": "rollout",
    "cohort_keys": "rollout",
    "parse_cohort": "rollout",
    "parse_window": "rollout",
    "manifest_schema": "schema",
    "BUILTIN_PREDICATES": "spec",
    "ROLLOUT_MODES": "spec",
    "AutonomyTier": "spec",
    "ReceiptPolicy": "spec",
    "EntryWorkflow": "syntax",
    "HandoffTarget": "syntax",
    "TriggerName": "syntax",
    "parse_target": "syntax",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())


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
