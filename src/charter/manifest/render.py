"""Stable JSON forms of personas and manifests (keys as in seed 003, canonical enum values)."""

from __future__ import annotations

import dataclasses
from typing import Any

from charter.policy import Policy, effective

from .model import Manifest, Persona
from .workflow_model import Stage


def _policy(policy: Policy | None) -> dict[str, Any] | None:
    return None if policy is None else policy.to_dict()


def _stage(stage: Stage) -> dict[str, Any]:
    return {
        "name": stage.name,
        "allowed_tools": list(stage.allowed_tools) if stage.allowed_tools is not None else None,
        "side_effect_level": stage.side_effect_level.label
        if stage.side_effect_level is not None
        else None,
        "max_iterations": stage.max_iterations,
        "on_exit": dataclasses.asdict(stage.on_exit) if stage.on_exit else None,
    }


def capability_tools(persona: Persona) -> list[dict[str, Any]]:
    """Each declared capability: its side-effect level, the charter tools behind it, which
    of those the persona's effective policy allows, and ``declared, no tool here`` when
    no charter tool performs it."""
    from charter.policy import decide_resource

    from .capabilities import capability_meaning

    frames = [persona.frame()]
    out: list[dict[str, Any]] = []
    for cap in persona.capabilities or ():
        meaning = capability_meaning(cap)
        tools = list(meaning.tools) if meaning is not None else []
        allowed = [t for t in tools if decide_resource("tools", t, frames).allowed]
        if not tools:
            status = "declared, no tool here"
        elif allowed:
            status = "tool here"
        else:
            status = "tool here, not in this persona's tools"
        out.append(
            {
                "capability": cap,
                "side_effect_level": meaning.level if meaning is not None else None,
                "tools": tools,
                "tools_allowed": allowed,
                "status": status,
                "note": (meaning.note or None) if meaning is not None else None,
            }
        )
    return out


def persona_to_dict(persona: Persona, manifest: Manifest | None = None) -> dict[str, Any]:
    """Everything about a persona; with ``manifest``, also its routes and trigger bindings."""
    out: dict[str, Any] = {
        "name": persona.name,
        "version": persona.version,
        "description": persona.description,
        "owner": persona.owner,
        "entry_workflow": persona.entry_workflow.raw,
        # "python", or the host that runs it ("harn": `persona run` refuses it)
        "entry_host": persona.entry_workflow.host,
        "tools": list(persona.tools) if persona.tools is not None else None,
        "capabilities": list(persona.capabilities) if persona.capabilities is not None else None,
        "capability_tools": capability_tools(persona),
        "autonomy_tier": persona.autonomy_tier.value,
        "receipt_policy": persona.receipt_policy.value,
        "triggers": [str(t) for t in persona.triggers],
        "schedules": list(persona.schedules),
        "handoffs": [t.raw for t in persona.handoffs],
        "context_packs": list(persona.context_packs),
        "evals": list(persona.evals),
        "budget": dataclasses.asdict(persona.budget),
        "runtime": dataclasses.asdict(persona.runtime),
        "model_policy": {
            "default_model": persona.model_policy.default_model,
            "escalation_model": persona.model_policy.escalation_model,
            "fallback_models": list(persona.model_policy.fallback_models),
            "reasoning_effort": persona.model_policy.reasoning_effort,
            # what the run's agent loop receives (charter.agent.reasoning)
            "agent_options": persona.model_policy.agent_options(),
        },
        "rollout_policy": {
            "mode": persona.rollout_policy.mode,
            "percentage": persona.rollout_policy.percentage,
            "cohorts": list(persona.rollout_policy.cohorts),
            "named_cohorts": list(persona.rollout_policy.named_cohorts),
            "promotion": dataclasses.asdict(persona.rollout_policy.promotion)
            if persona.rollout_policy.promotion
            else None,
        },
        "package_source": dataclasses.asdict(persona.package_source)
        if persona.package_source
        else None,
        "stages": [_stage(s) for s in persona.stages],
        "policy": _policy(persona.policy),
        "folder_policy": _policy(persona.folder_policy),
        "effective_policy": effective([persona.frame()]),
        "instructions": dataclasses.asdict(persona.instructions) if persona.instructions else None,
        "manifest_source": persona.manifest_source,
        "sources": [s.to_dict() for s in persona.sources],
    }
    if manifest is not None:
        out["handoff_routes"] = [
            {
                "id": r.id,
                "kind": r.kind,
                "route": [
                    {
                        "target": step.target.raw,
                        "target_kind": step.target.kind,
                        "when": step.when,
                        "policy_override": _policy(step.policy_override),
                    }
                    for step in r.route
                ],
            }
            for r in manifest.routes_from(persona.name)
        ]
        out["trigger_bindings"] = [b.to_dict() for b in manifest.trigger_bindings(persona.name)]
        out["persona_roots"] = [
            {"path": path, "origin": origin} for path, origin in manifest.persona_roots
        ]
    return out


def manifest_to_dict(manifest: Manifest) -> dict[str, Any]:
    """``{"ok", "manifest_path", "personas": [...]}`` or ``{"ok": false, "errors": [...]}``."""
    if manifest.errors:
        return {
            "ok": False,
            "manifest_path": manifest.manifest_path,
            "errors": [e.to_dict() for e in manifest.errors],
        }
    return {
        "ok": True,
        "manifest_path": manifest.manifest_path,
        "personas": [persona_to_dict(p) for p in manifest.personas],
    }
