"""One persona table -> :class:`Persona`, with every persona-local rule checked.

Cross-persona rules (duplicate names, handoff targets that must exist) need the whole
manifest and live in :mod:`charter.manifest.loader`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from charter.policy import (
    BUILTIN_TOOLS,
    Frame,
    Policy,
    PolicyError,
    Rules,
    SideEffectLevel,
    decide_resource,
)

from .capabilities import CapabilitySurface
from .cron import cron_error
from .errors import Collector, join
from .fields import read_table
from .model import Budget, ModelPolicy, Persona, PersonaSource, RuntimeSettings
from .reach import unreceived
from .rollout import build_rollout
from .spec import PERSONA, AutonomyTier, ReceiptPolicy
from .syntax import (
    EntryWorkflow,
    HandoffTarget,
    check_name,
    parse_entry,
    parse_target,
    parse_trigger,
)

if TYPE_CHECKING:
    from .workflow_model import PackageSource, Stage


@dataclass
class BuildContext:
    """What persona validation needs from its surroundings."""

    surface: CapabilitySurface
    base_dir: Path  # entry_workflow paths are relative to the declaring file's directory
    #: where ``charter persona eval`` looks for ``evals/<pack>.toml`` (None: not checked)
    eval_dir: Path | None = None
    #: eval pack name -> whether its file exists (shared by the personas of one load)
    eval_files: dict[str, bool] = field(default_factory=dict)
    #: (field path, target) of every handoff, checked once all persona names are known.
    handoff_refs: list[tuple[Collector, str, HandoffTarget]] = field(default_factory=list)


def parse_policy(value: Mapping[str, Any], path: str, col: Collector) -> Policy | None:
    """Validate a policy table with charter.policy, re-rooting its issues at ``path``."""
    try:
        return Policy.from_dict(value, source=col.manifest_path)
    except PolicyError as exc:
        for issue in exc.issues:
            col.add(join(path, issue.field_path) if issue.field_path else path, issue.message)
        return None


def _strings(checked: dict[str, Any], key: str) -> tuple[str, ...]:
    return tuple(v for _, v in checked.get(key, ()))


def build_persona(
    data: Any, path: str, col: Collector, ctx: BuildContext, source: PersonaSource
) -> Persona | None:
    """Validate one persona table; ``None`` when required parts are missing or broken."""
    start = len(col.errors)
    checked = read_table(data, PERSONA, path, col)
    if checked is None:
        return None
    assert isinstance(data, Mapping)

    name = checked.get("name")
    if name is not None and (err := check_name(name)):
        col.add(join(path, "name"), err)
    if "tools" not in data and "capabilities" not in data:
        col.add(path, "missing required field: tools or capabilities (at least one)")
    elif not any(data.get(key) for key in ("tools", "capabilities")):
        # both declared but empty grants nothing: the seed asks for a surface, not a key
        col.add(path, "tools or capabilities must name at least one tool or capability")

    entry = None
    if "entry_workflow" in checked:
        key = "entry_workflow" if "entry_workflow" in data else "entry"
        parsed = parse_entry(checked["entry_workflow"])
        if isinstance(parsed, str):
            col.add(join(path, key), parsed)
        elif not parsed.runnable:
            # another host's workflow: valid, not ours to open or run (persona run refuses it)
            entry = parsed
            col.warn("foreign_entry", join(path, key), parsed.foreign_message)
        else:
            entry = parsed
            if parsed.path is not None and not (ctx.base_dir / parsed.path).is_file():
                col.add(
                    join(path, key),
                    f"workflow file {parsed.path!r} not found (relative to {str(ctx.base_dir)!r})",
                )

    tools = None
    if "tools" in checked:
        tools = tuple(dict.fromkeys(t.lower() for _, t in checked["tools"]))
    capabilities = None
    if "capabilities" in checked:
        caps: list[str] = []
        for i, cap in checked["capabilities"]:
            if err := ctx.surface.check(cap):
                col.add(join(join(path, "capabilities"), i), err)
            else:
                caps.append(cap)
        capabilities = tuple(dict.fromkeys(caps))

    triggers = []
    for i, raw in checked.get("triggers", ()):
        trig = parse_trigger(raw)
        if isinstance(trig, str):
            col.add(join(join(path, "triggers"), i), trig)
        else:
            triggers.append(trig)
            if why := unreceived(trig):
                col.warn("trigger_not_received", join(join(path, "triggers"), i), why)

    schedules = []
    for i, raw in checked.get("schedules", ()):
        if err := cron_error(raw):
            col.add(join(join(path, "schedules"), i), err)
        else:
            schedules.append(raw)

    handoffs = []
    for i, raw in checked.get("handoffs", ()):
        target = parse_target(raw)
        item_path = join(join(path, "handoffs"), i)
        if isinstance(target, str):
            col.add(item_path, target)
        else:
            handoffs.append(target)
            ctx.handoff_refs.append((col, item_path, target))

    _check_evals(checked, "eval_packs" if "eval_packs" in data else "evals", entry, path, col, ctx)
    stages = _stages(checked.get("stages", []), tools, join(path, "stages"), col)
    policy = None
    if "policy" in checked:
        policy = parse_policy(checked["policy"], join(path, "policy"), col)

    if len(col.errors) > start or name is None or entry is None:
        return None
    budget = Budget(**checked.get("budget", {}))
    model = checked.get("model_policy", {})
    rollout_policy = build_rollout(
        checked.get("rollout_policy", {}), triggers, join(path, "rollout_policy"), col
    )
    if len(col.errors) > start:
        return None
    package_source: PackageSource | None = None
    if "package_source" in checked:
        from .workflow_model import PackageSource  # loaded only when a persona declares one

        package_source = PackageSource(**checked["package_source"])
    return Persona(
        name=name,
        description=checked["description"],
        entry_workflow=entry,
        autonomy_tier=AutonomyTier(checked["autonomy_tier"]),
        receipt_policy=ReceiptPolicy(checked["receipt_policy"]),
        version=checked.get("version"),
        tools=tools,
        capabilities=capabilities,
        triggers=tuple(triggers),
        schedules=tuple(schedules),
        handoffs=tuple(handoffs),
        context_packs=_strings(checked, "context_packs"),
        evals=_strings(checked, "evals"),
        owner=checked.get("owner"),
        budget=budget,
        runtime=RuntimeSettings(**checked.get("runtime", {})),
        model_policy=ModelPolicy(
            model.get("default_model"),
            model.get("escalation_model"),
            tuple(v for _, v in model.get("fallback_models", ())),
            model.get("reasoning_effort"),
        ),
        rollout_policy=rollout_policy,
        package_source=package_source,
        stages=stages,
        policy=policy,
        sources=(source,),
    )


def _check_evals(
    checked: dict[str, Any],
    key: str,
    entry: EntryWorkflow | None,
    path: str,
    col: Collector,
    ctx: BuildContext,
) -> None:
    """Each eval pack needs its file, where ``charter persona eval`` will look for it.

    Another host's persona keeps its evals in that host's layout: a warning, not an error.
    """
    evals = checked.get("evals", ())
    if not evals:
        return
    if entry is not None and not entry.runnable:
        names = ", ".join(v for _, v in evals)
        col.warn(
            "foreign_evals",
            join(path, key),
            f"eval packs ({names}) belong to another host ({entry.host}); "
            "`charter persona eval` runs only charter eval files (evals/<pack>.toml)",
        )
        return
    if ctx.eval_dir is None:
        return
    for i, name in evals:
        known = ctx.eval_files.get(name)
        if known is None:  # one stat per eval pack, not per persona naming it
            known = ctx.eval_files[name] = (ctx.eval_dir / "evals" / f"{name}.toml").is_file()
        if not known:
            file = ctx.eval_dir / "evals" / f"{name}.toml"
            col.add(
                join(join(path, key), i),
                f"eval pack {name!r} has no eval file (expected {str(file)!r}, where "
                "`charter persona eval` reads it)",
            )


def _tool_known(tool: str, persona_tools: tuple[str, ...] | None) -> bool:
    if persona_tools is None:
        return tool in BUILTIN_TOOLS
    # the persona's tools list is a policy allow list: ask the policy core, not a glob of our own
    return _in_tools(tool, persona_tools)


@functools.lru_cache(maxsize=1024)
def _in_tools(tool: str, persona_tools: tuple[str, ...]) -> bool:
    """Asked once per (tool, tools list): personas share lists and stages repeat tools."""
    frame = Frame(Policy(tools=Rules((persona_tools,))), "persona tools")
    return decide_resource("tools", tool, [frame]).allowed


def _stages(
    items: list[dict[str, Any] | None], tools: tuple[str, ...] | None, path: str, col: Collector
) -> tuple[Stage, ...]:
    """Build stages and apply seed 000's rules (tools, levels, on_exit targets, duplicates)."""
    if not items:
        return ()
    from .workflow_model import Stage, StageExit  # loaded only when a persona has stages

    declared: dict[str, int] = {}
    for i, item in enumerate(items):
        if item and "name" in item:
            name = item["name"]
            if name in declared:
                col.add(
                    join(join(path, i), "name"),
                    f"duplicate stage name {name!r} (first declared at {path}[{declared[name]}])",
                )
            else:
                declared[name] = i
    out: list[Stage] = []
    for i, item in enumerate(items):
        if item is None or "name" not in item:
            continue
        stage_path = join(path, i)
        allowed = None
        if "allowed_tools" in item:
            allowed_list = []
            for j, raw in item["allowed_tools"]:
                tool = raw.lower()
                if not _tool_known(tool, tools):
                    where = (
                        f"the persona's tools ({', '.join(tools) or 'none'})"
                        if tools is not None
                        else "charter's tool catalog (the persona declares no tools)"
                    )
                    col.add(
                        join(join(stage_path, "allowed_tools"), j),
                        f"tool {raw!r} is not in {where}",
                    )
                allowed_list.append(tool)
            allowed = tuple(dict.fromkeys(allowed_list))
        on_exit = None
        if "on_exit" in item:
            exits = item["on_exit"]
            for key in ("on_complete", "on_failure"):
                target = exits.get(key)
                if target is not None and target not in declared:
                    col.add(
                        join(join(stage_path, "on_exit"), key),
                        f"stage {target!r} is not declared by this persona "
                        f"(stages: {', '.join(declared) or 'none'})",
                    )
            on_exit = StageExit(exits.get("on_complete"), exits.get("on_failure"))
        level = item.get("side_effect_level")
        out.append(
            Stage(
                name=item["name"],
                allowed_tools=allowed,
                side_effect_level=SideEffectLevel.parse(level) if level is not None else None,
                max_iterations=item.get("max_iterations"),
                on_exit=on_exit,
            )
        )
    return tuple(out)
