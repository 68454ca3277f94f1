"""A launch plan: everything ``charter launch`` will do, computed without side effects.

``print-policy`` and ``launch --dry-run`` render a plan; ``launch`` executes one.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from charter.manifest.discovery import find_repo_root
from charter.policy import BUILTIN_TOOLS, Policy, unknown_tool_names

from . import sandboxing
from .argv import Layered, layer
from .clis import CLIS, CliSpec, get_cli
from .errors import LaunchError
from .job import Job, new_tmpdir, which
from .overlay import Overlay, compose
from .resolve import Resolved, resolve_persona
from .translate import STRONG, TRANSLATORS, Context, Element, Translation

RUN_MODES = ("unshare", "swap")
RUN_MODE_ENV = "CHARTER_RUN_MODE"


@dataclass(frozen=True)
class LaunchOptions:
    tool: str
    persona: str
    user_args: tuple[str, ...] = ()
    cwd: str | None = None
    env: Mapping[str, str] | None = None
    manifest: str | None = None
    prefer: str | None = None
    meta: str = "top"
    mcp: bool = True
    strict: bool = False
    run_mode: str | None = None
    tmpdir: str | None = None
    sandbox: str | None = None  # auto | always | never (None: the policy's, else auto)


@dataclass
class Plan:
    spec: CliSpec
    resolved: Resolved
    overlay: Overlay
    translation: Translation
    layered: Layered
    argv: list[str]
    env: dict[str, str]  # variables charter sets (on top of the inherited environment)
    base_env: dict[str, str]
    has_policy: bool
    run_mode: str
    tmpdir: str
    workspace: str
    target: str  # absolute path of the instructions file the CLI reads
    strict: bool
    notes: list[str] = field(default_factory=list)
    sandbox_mode: str = "never"
    sandbox: dict[str, Any] | None = None  # charter.launch.sandboxing.spec, when wrapped

    @property
    def elements(self) -> list[Element]:
        return self.translation.elements

    @property
    def gaps(self) -> list[Element]:
        return [e for e in self.elements if e.strength != STRONG]

    @property
    def refusals(self) -> list[Element]:
        """Requested elements the CLI cannot fully enforce (``--strict-policy`` refuses)."""
        return [e for e in self.elements if e.requested and e.strength != STRONG]

    def full_env(self) -> dict[str, str]:
        return {**self.base_env, **self.env}

    def job(self) -> Job:
        """The data the runner needs (also what the launch cache stores)."""
        return Job(
            tool=self.spec.name,
            binary=self.spec.binary,
            npm_package=self.spec.npm_package,
            argv=list(self.argv),
            env=dict(self.env),
            base_env=self.base_env,
            workspace=self.workspace,
            target=self.target,
            overlay_name=self.spec.overlay_file,
            overlay_text=self.overlay.text,
            files=dict(self.translation.files),
            mirrors=dict(self.translation.mirrors),
            tmpdir=self.tmpdir,
            run_mode=self.run_mode,
            sandbox=self.sandbox,
        )

    def to_dict(self) -> dict[str, Any]:
        persona = self.resolved.persona
        return {
            "persona": persona.name,
            "tool": self.spec.name,
            "overlay_file": self.spec.overlay_file,
            "overlay_source": self.overlay.source,
            "overlay_target": self.target,
            "run_mode": self.run_mode,
            "sandbox": {
                "mode": self.sandbox_mode,
                "wrapped": self.sandbox is not None,
                "reasons": list(self.sandbox["reasons"]) if self.sandbox else [],
            },
            "autonomy_tier": str(persona.autonomy_tier),
            "has_policy": self.has_policy,
            "strict_policy": self.strict,
            "policy_source": [s.path for s in persona.sources if not s.shadowed],
            "policy": persona.effective_policy.to_dict(),
            "environment": dict(self.env),
            "elements": [e.to_dict() for e in self.elements],
            "args": {
                "defaults": list(self.layered.defaults),
                "user": list(self.layered.user),
                "filtered": [f.to_dict() for f in self.layered.filtered],
                "policy": list(self.layered.policy),
            },
            "argv": list(self.argv),
            "files": {
                os.path.join(self.tmpdir, name): text
                for name, text in self.translation.files.items()
            },
            "mcp_servers": list(self.translation.mcp),
            "permission_mode": self.translation.permission_mode,
            "gaps": [e.to_dict() for e in self.gaps],
            "refused": [e.to_dict() for e in self.refusals] if self.strict else [],
            "notes": [*self.notes, *self.translation.notes, *self.overlay.warnings],
            "overlay_warnings": list(self.overlay.warnings),
        }


def policy_present(policy: Policy) -> bool:
    """Does the policy restrict anything at all?"""
    return any(k != "name" for k in policy.to_dict())


#: ``defaults`` keys for every CLI (applied before the CLI's own), and keys that are not
#: argument lists.
ALL_TOOLS_KEYS = ("*", "all")
_NON_ARG_KEYS = ("tool",)


def _args_of(value: Any) -> list[str]:
    if isinstance(value, Mapping):
        value = value.get("args")
    if isinstance(value, str):
        return [value]
    if isinstance(value, Sequence):
        return [str(v) for v in value]
    return []


def _defaults(resolved: Resolved, tool: str, notes: list[str] | None = None) -> list[str]:
    """``defaults["*"]`` (every CLI) then ``defaults[tool]``, as seed 004 layers them."""
    ins = resolved.persona.instructions
    if ins is None:
        return []
    out: list[str] = []
    for key in (*ALL_TOOLS_KEYS, tool):
        out.extend(_args_of(ins.defaults.get(key)))
    if notes is not None:
        known = {*ALL_TOOLS_KEYS, *_NON_ARG_KEYS, *TRANSLATORS}
        for key in ins.defaults:
            if key not in known:
                notes.append(
                    f"persona.json defaults[{key!r}] is not a CLI charter launches "
                    f"({', '.join(sorted(TRANSLATORS))}) nor '*': ignored"
                )
    return out


def default_run_mode(env: Mapping[str, str]) -> str:
    mode = env.get(RUN_MODE_ENV, "").strip().lower()
    if mode in RUN_MODES:
        return mode
    return "unshare" if sys.platform.startswith("linux") and which("unshare") else "swap"


def build_plan(opts: LaunchOptions) -> Plan:
    """Resolve, compose and translate; raise :class:`LaunchError` for bad input."""
    spec = get_cli(opts.tool)
    if spec is None:
        raise LaunchError(f"unknown tool {opts.tool!r}; expected one of {', '.join(CLIS)}")
    env = dict(os.environ if opts.env is None else opts.env)
    workspace = os.path.realpath(opts.cwd or os.getcwd())
    try:
        resolved = resolve_persona(
            opts.persona, cwd=workspace, env=env, manifest=opts.manifest, prefer=opts.prefer
        )
    except Exception as exc:
        from .resolve import ResolveError

        if isinstance(exc, ResolveError):
            raise LaunchError(str(exc)) from None
        raise
    from .overlay import OverlayError

    try:
        overlay = compose(
            resolved.persona,
            resolved.manifest,
            spec.name,
            spec.overlay_file,
            meta=opts.meta,
        )
    except OverlayError as exc:
        raise LaunchError(f"overlay: {exc}") from None
    persona = resolved.persona
    policy = persona.effective_policy
    has_policy = policy_present(policy)
    explicit_tier = any(s.kind != "folder" for s in persona.sources)
    run_mode = (opts.run_mode or default_run_mode(env)).lower()
    if run_mode not in RUN_MODES:
        raise LaunchError(f"run mode must be one of {', '.join(RUN_MODES)}, got {run_mode!r}")
    euid = os.geteuid() if hasattr(os, "geteuid") else 1000
    tmpdir = opts.tmpdir or new_tmpdir(spec.name, euid)
    home = env.get("HOME") or os.path.expanduser("~")
    ctx = Context(
        spec=spec,
        policy=policy,
        has_policy=has_policy,
        tier=str(persona.autonomy_tier),
        explicit_tier=explicit_tier,
        workspace=workspace,
        home=home,
        tmpdir=tmpdir,
        env=env,
        user_args=opts.user_args,
        mcp_servers=(persona.instructions.mcp_servers if persona.instructions else {}),
        inject_mcp=opts.mcp,
        euid=euid,
    )
    translate, yolo = TRANSLATORS[spec.name]
    translation = translate(ctx)
    notes: list[str] = list(persona.policy_notes)
    cli_names = [name for t in spec.tools for name in (t.canonical, t.name)]
    notes.extend(
        unknown_tool_names(
            policy, cli_names, where=f"a {spec.name} tool", suggest_from=BUILTIN_TOOLS
        )
    )
    try:
        sandbox_mode = sandboxing.decide_mode(
            opts.sandbox,
            policy,
            env,
            persona.instructions.sandbox if persona.instructions else None,
        )
    except ValueError as exc:
        raise LaunchError(str(exc), 2) from None
    gaps = sandboxing.gap_elements(translation.elements)
    sandbox_spec: dict[str, Any] | None = None
    if sandboxing.wanted(sandbox_mode, policy, gaps):
        reasons = [f"{e.key}: {e.strength} in {spec.name} ({e.reason})" for e in gaps]
        translation.elements = sandboxing.enforced_by_sandbox(
            translation.elements, gaps, sandboxing.inexact_allows(policy, workspace, home)
        )
        read_only = sandboxing.nest(spec.name, translation)
        state_read = sandboxing.redirect_state(spec.name, env, home, tmpdir, translation)
        sandbox_spec = sandboxing.spec(
            policy,
            spec.name,
            env,
            home,
            tmpdir,
            reasons,
            read_only=read_only,
            state_read=state_read,
            workspace=workspace,
            own_state=[os.path.join(tmpdir, name) for name in translation.mirrors],
        )
    defaults = _defaults(resolved, spec.name, notes)
    enforcing = has_policy or explicit_tier
    if not enforcing:
        extra, note = yolo(ctx)
        defaults = [*defaults, *extra]
        if note:
            notes.append(note)
    p = policy

    def active(dim: str) -> bool:
        if dim == "any":
            return enforcing
        if dim == "tools":
            return p.tools.restricted or p.side_effect_level is not None
        if dim == "paths":
            return p.paths.restricted
        if dim == "mcp_servers":
            return p.mcp_servers.restricted
        if dim == "mcp_allow":
            return bool(p.mcp_servers.allow or p.tools.allow) or p.side_effect_level is not None
        return False

    layered = layer(
        spec, defaults, opts.user_args, translation.args, filtering=enforcing, active=active
    )
    binary = which(spec.binary, path=env.get("PATH")) or spec.binary
    # where every CLI reads it: they all walk up to the repository root (claude and gemini
    # from the cwd up, codex and opencode from the root down), so the root's file is the
    # one each of them loads; outside a repository, the working directory
    root = find_repo_root(Path(workspace))
    target = os.path.join(str(root) if root is not None else workspace, spec.overlay_file)
    plan_env = {
        "AGENT_PERSONA_NAME": persona.name,
        "AGENT_PERSONA_PATH": resolved.path,
        "AGENT_PERSONA_TOOL": spec.name,
        "AGENT_PERSONA_OVERLAY_FILE": spec.overlay_file,
        "AGENT_PERSONA_RUN_MODE": run_mode,
        "CHARTER_PERSONA": persona.name,
        **translation.env,
    }
    return Plan(
        spec=spec,
        resolved=resolved,
        overlay=overlay,
        translation=translation,
        layered=layered,
        argv=[binary, *layered.final],
        env=plan_env,
        base_env=env,
        has_policy=has_policy,
        run_mode=run_mode,
        tmpdir=tmpdir,
        workspace=workspace,
        target=target,
        strict=opts.strict,
        notes=notes,
        sandbox_mode=sandbox_mode,
        sandbox=sandbox_spec,
    )


def dependencies(plan: Plan) -> list[str]:
    """Every path whose change could change this plan (for the launch cache).

    A ``?`` prefix means only existence, type, mode and owner matter (busy directories:
    the working directory and its parents, HOME, /run/charter).
    """
    deps: set[str] = set()
    env = plan.base_env
    directory = plan.workspace
    while True:  # manifest and repository-root discovery walk up from the cwd
        deps.update(
            (os.path.join(directory, "charter.toml"), "?" + os.path.join(directory, ".git"))
        )
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    manifest = plan.resolved.manifest
    home = env.get("HOME") or os.path.expanduser("~")
    roots = [r for r, _ in manifest.persona_roots]
    if manifest.root:
        roots.append(os.path.join(manifest.root, ".personas"))
    roots.append(os.path.join(home, ".personas"))
    roots.extend(e for e in env.get("CHARTER_PERSONA_PATHS", "").split(os.pathsep) if e)
    for root in roots:
        deps.add(root)
        for sub in (".shared", "_shared"):
            deps.add(os.path.join(root, sub))
        try:
            children = os.listdir(root)
        except OSError:
            continue
        for child in children:
            folder = os.path.join(root, child)
            deps.add(folder)
            if os.path.isdir(folder):
                with contextlib.suppress(OSError):
                    deps.update(os.path.join(folder, f) for f in os.listdir(folder))
    if manifest.manifest_path:
        deps.add(os.path.abspath(manifest.manifest_path))
    for source in plan.resolved.persona.sources:
        deps.add(source.path)
    if plan.resolved.persona.instructions is not None:  # persona.json include fragments
        deps.update(plan.resolved.persona.instructions.includes)
    deps.update(p for p in (plan.overlay.source, plan.overlay.meta, *plan.overlay.includes) if p)
    for directory in env.get("PATH", "").split(os.pathsep):
        if directory:
            deps.add(directory)
    codex_home = env.get("CODEX_HOME") or os.path.join(home, ".codex")
    config_home = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    deps.update(
        (
            plan.argv[0],
            "?" + home,
            "?" + codex_home,
            os.path.join(codex_home, "config.toml"),
            os.path.join(config_home, "opencode", "opencode.json"),
            os.path.join(plan.workspace, "opencode.json"),
            "?/run",
            "?/run/charter",
        )
    )
    policy = plan.resolved.persona.effective_policy
    for rules in (policy.paths.any, policy.paths.read, policy.paths.write):
        for pattern in (*rules.deny, *(p for g in rules.allow for p in g)):
            literal = pattern.split("*", 1)[0].rstrip("/") or "/"
            if literal.startswith("~"):
                literal = home + literal[1:]
            elif not literal.startswith("/"):
                literal = os.path.join(plan.workspace, literal)
            deps.add("?" + literal)
    return sorted(deps)
