"""``charter launch`` inside ``charter.sandbox``: where a CLI cannot enforce, the kernel does.

``--sandbox auto`` (the default) wraps the CLI in bubblewrap whenever the policy has a path
or network element the CLI's own translation rates below ``strong``; ``always`` wraps it
whenever the policy restricts paths or network; ``never`` does not (and then
``--strict-policy`` refuses the gap, as before). A policy saying ``sandbox = "off"``
means ``never`` unless ``--sandbox`` says otherwise.

The sandboxed CLI keeps what it needs without being able to plant what runs after it:
its state moves into the launch's temp dir (:func:`redirect_state`; the user's state and
config dirs are readable, not writable), its temp files stay writable, and its model
endpoints are reachable: the sandbox's network rules are the persona's with the
endpoints of the CLI (and of any ``*_BASE_URL`` override) allowed as scheme, host and
port (nothing wider: a base URL on 127.0.0.1 does not open its other ports), so with
``network.deny = ["*"]`` the CLI still reaches its model through charter's allow-listing
proxy while everything the model asks for elsewhere is refused.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from charter.policy import Policy, Rules

from .planted import allowed_by_name
from .translate import PARTIAL, STRONG, Element, Translation

SANDBOX_MODES = ("auto", "always", "never")

#: Model endpoints each CLI talks to (hosts), before any base-URL override.
ENDPOINTS: dict[str, tuple[str, ...]] = {
    "claude": ("api.anthropic.com", "statsig.anthropic.com", "console.anthropic.com"),
    "codex": ("api.openai.com", "chatgpt.com", "auth.openai.com"),
    "gemini": (
        "generativelanguage.googleapis.com",
        "cloudcode-pa.googleapis.com",
        "oauth2.googleapis.com",
    ),
    "opencode": ("api.anthropic.com", "api.openai.com", "opencode.ai", "models.dev"),
}
#: Environment variables that move a CLI's endpoint (their hosts are allowed too).
BASE_URL_VARS = (
    "ANTHROPIC_BASE_URL",
    "OPENAI_BASE_URL",
    "GOOGLE_GEMINI_BASE_URL",
    "GEMINI_BASE_URL",
    "OPENCODE_BASE_URL",
)


def gap_elements(elements: Sequence[Element]) -> list[Element]:
    """Path and network elements the CLI itself enforces less than strongly."""
    return [
        e
        for e in elements
        if e.key.split(".", 1)[0] in ("paths", "network") and e.strength != STRONG
    ]


#: How an element held by charter's sandbox shows it in ``translation``.
SANDBOX_LABEL = "bubblewrap sandbox (charter.sandbox)"

#: The environment variable that sets the mode when ``--sandbox`` is not given.
SANDBOX_ENV = "CHARTER_LAUNCH_SANDBOX"


def decide_mode(
    requested: str | None,
    policy: Policy,
    env: Mapping[str, str],
    persona_mode: str | None = None,
) -> str:
    """``--sandbox``, else ``$CHARTER_LAUNCH_SANDBOX``, else persona.json ``sandbox``, else
    ``never`` for a policy saying ``sandbox = "off"``, else ``auto``."""
    requested = requested or env.get(SANDBOX_ENV) or persona_mode or None
    if requested is not None:
        if requested not in SANDBOX_MODES:
            raise ValueError(
                f"--sandbox / ${SANDBOX_ENV}: expected one of {', '.join(SANDBOX_MODES)}, "
                f"got {requested!r}"
            )
        return requested
    return "never" if policy.sandbox == "off" else "auto"


def wanted(mode: str, policy: Policy, gaps: Sequence[Element]) -> bool:
    if mode == "never":
        return False
    if mode == "always":
        return policy.paths.restricted or policy.network.restricted
    return bool(gaps)


def endpoint_hosts(tool: str, env: Mapping[str, str], home: str | None = None) -> list[str]:
    """The model endpoints, each as ``scheme://host:port`` (a network rule allowing that
    endpoint and nothing wider: a base URL on ``127.0.0.1:PORT`` must not open every
    other port of the host): the CLI's defaults (https, 443), the base-URL variables,
    and the providers the CLI's own configuration names (codex ``config.toml``
    ``model_providers.*.base_url``; opencode ``provider.*.options.baseURL`` in
    ``OPENCODE_CONFIG_CONTENT`` or its config file)."""
    from charter.policy.network import parse_target, port_of

    urls = [env[var] for var in BASE_URL_VARS if env.get(var)]
    urls.extend(_configured_urls(tool, env, home))
    rules = [f"https://{host}:443" for host in ENDPOINTS.get(tool, ())]
    for url in urls:
        try:
            host, scheme = parse_target(url)
            port = port_of(url)
        except ValueError:
            continue
        if scheme is None or port is None:
            continue  # not a URL: no endpoint to allow (the CLI cannot use it either)
        shown = f"[{host}]" if ":" in host else host
        rules.append(f"{scheme}://{shown}:{port}")
    return list(dict.fromkeys(rules))


def _configured_urls(tool: str, env: Mapping[str, str], home: str | None) -> list[str]:
    import json

    home = home or env.get("HOME") or os.path.expanduser("~")
    urls: list[str] = []
    try:
        if tool == "codex":
            import tomllib

            path = os.path.join(
                env.get("CODEX_HOME") or os.path.join(home, ".codex"), "config.toml"
            )
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
            providers = data.get("model_providers") or {}
            chosen = data.get("model_provider")
            for name, provider in providers.items():
                if isinstance(provider, dict) and (chosen is None or name == chosen):
                    urls.append(str(provider.get("base_url") or ""))
        elif tool == "opencode":
            texts = [env.get("OPENCODE_CONFIG_CONTENT") or ""]
            config = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
            for name in ("opencode.json", "config.json"):
                try:
                    with open(os.path.join(config, "opencode", name), encoding="utf-8") as fh:
                        texts.append(fh.read())
                except OSError:
                    continue
            for text in filter(None, texts):
                data = json.loads(text)
                for provider in (data.get("provider") or {}).values():
                    options = provider.get("options") if isinstance(provider, dict) else None
                    if isinstance(options, dict) and options.get("baseURL"):
                        urls.append(str(options["baseURL"]))
    except (OSError, ValueError, AttributeError):
        return [u for u in urls if u]
    return [u for u in urls if u]


def sandbox_policy(
    policy: Policy, tool: str, env: Mapping[str, str], home: str | None = None
) -> Policy:
    """The persona's policy with the CLI's model endpoints reachable (nothing else added)."""
    net = policy.network
    if not net.restricted:
        return policy
    from charter.policy import host_of

    endpoints = endpoint_hosts(tool, env, home)
    hosts = {host_of(e) for e in endpoints}
    allow = tuple(tuple(dict.fromkeys((*group, *endpoints))) for group in net.allow) or (
        (tuple(endpoints),) if "*" in net.deny else ()
    )
    deny = tuple(d for d in net.deny if d != "*" and _host(d) not in hosts)
    return dataclasses.replace(policy, network=Rules(allow, deny))


def _host(rule: str) -> str | None:
    from charter.policy import host_of

    try:
        return host_of(rule.split("://", 1)[-1].lstrip("*."))
    except ValueError:
        return None


def inexact_allows(policy: Policy, workspace: str, home: str) -> dict[str, list[str]]:
    """``paths.<access>.allow`` -> the allow patterns a mount cannot enforce exactly (bare
    names and globs, globs below a directory): the sandbox holds them only approximately,
    so those elements stay below strong (and ``--strict-policy`` refuses them)."""
    from charter.policy import make_context
    from charter.sandbox.profile import inexact_patterns

    ctx = make_context(workspace, home)
    out: dict[str, list[str]] = {}
    for access in ("read", "write"):
        found = inexact_patterns(policy.paths.for_access(access), ctx)
        if found:
            out[f"paths.{access}.allow"] = found
    return out


#: Subdirectories of a CLI's state dir that hold what one run writes (sessions, logs,
#: caches): a sandboxed launch starts them empty in its own state dir instead of linking
#: the user's (read-only inside the sandbox).
STATE_SUBDIRS: dict[str, frozenset[str]] = {
    "claude": frozenset(
        {
            "projects",
            "todos",
            "shell-snapshots",
            "statsig",
            "debug",
            "session-env",
            "logs",
            "file-history",
            "plans",
            "ide",
            "cache",
            "telemetry",
            "tasks",
        }
    ),
    "codex": frozenset(
        {"sessions", "archived_sessions", "log", "shell_snapshots", "tmp", ".tmp", "cache"}
    ),
    "gemini": frozenset({"tmp", "history"}),
    "opencode": frozenset({"log", "storage", "snapshot", "tool-output"}),
}


def redirect_state(
    tool: str, env: Mapping[str, str], home: str, tmpdir: str, translation: Translation
) -> list[str]:
    """Move the sandboxed CLI's state to the launch's own temp dir; return the user's
    state dirs it was moved from (readable inside, never writable).

    What a CLI keeps in its state dir runs after it: Claude's ``settings.json`` hooks, the
    MCP servers in ``~/.claude.json``, codex's ``config.toml``, gemini's settings,
    opencode's plugins and the binaries it downloads. The launch's copy mirrors the user's
    (files copied, so the CLI may rewrite them; directories linked, read-only; the
    :data:`STATE_SUBDIRS` a run writes start empty) and goes away with the launch.
    """
    sources: list[str] = []
    # its temp files too: readable and writable whatever the policy limits, gone after
    translation.env["TMPDIR"] = os.path.join(tmpdir, "tmp")

    def mirror(name: str, source: str) -> None:
        if name not in translation.mirrors:
            translation.mirrors[name] = source
        sources.append(translation.mirrors[name])

    if tool == "claude":
        own = env.get("CLAUDE_CONFIG_DIR") or os.path.join(home, ".claude")
        mirror("claude-home", own)
        # without CLAUDE_CONFIG_DIR, claude keeps .claude.json in HOME
        mirror(
            "claude-home/.claude.json",
            os.path.join(own if env.get("CLAUDE_CONFIG_DIR") else home, ".claude.json"),
        )
        translation.env["CLAUDE_CONFIG_DIR"] = os.path.join(tmpdir, "claude-home")
    elif tool == "codex":
        mirror("codex-home", env.get("CODEX_HOME") or os.path.join(home, ".codex"))
        translation.env["CODEX_HOME"] = os.path.join(tmpdir, "codex-home")
    elif tool == "gemini":
        user = env.get("GEMINI_CLI_HOME") or home
        mirror("gemini-home/.gemini", os.path.join(user, ".gemini"))
        translation.env["GEMINI_CLI_HOME"] = os.path.join(tmpdir, "gemini-home")
    elif tool == "opencode":
        for var, default in (
            ("XDG_DATA_HOME", ".local/share"),
            ("XDG_CACHE_HOME", ".cache"),
            ("XDG_STATE_HOME", ".local/state"),
        ):
            base = env.get(var) or os.path.join(home, default)
            name = f"opencode-{var.split('_')[1].lower()}"
            mirror(f"{name}/opencode", os.path.join(base, "opencode"))
            translation.env[var] = os.path.join(tmpdir, name)
        # the config dir (opencode.json, plugins, agents) stays where it is, read-only
        sources.append(
            os.path.join(env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config"), "opencode")
        )
    return list(dict.fromkeys(sources))


def enforced_by_sandbox(
    elements: Sequence[Element],
    gaps: Sequence[Element],
    inexact: Mapping[str, Sequence[str]] | None = None,
) -> list[Element]:
    """The elements with the gaps now held by the sandbox (strong, enforcer ``both``),
    except an allow list with patterns no mount expresses (``inexact``: element key ->
    patterns), which stays partial and says which patterns."""
    closing = {id(e) for e in gaps}
    out: list[Element] = []
    for e in elements:
        approximate = (inexact or {}).get(e.key)
        if id(e) in closing and approximate:
            out.append(
                dataclasses.replace(
                    e,
                    translation=(*e.translation, SANDBOX_LABEL),
                    strength=PARTIAL,
                    reason=f"no mount expresses {', '.join(map(repr, approximate))} (a bare "
                    "name or glob matches at any depth or only some files): the sandbox "
                    "mounts its deepest literal directory, never above the workspace; "
                    f"the CLI alone: {e.strength}",
                    enforcer="both" if e.translation else "sandbox",
                )
            )
        elif id(e) in closing:
            out.append(
                dataclasses.replace(
                    e,
                    translation=(*e.translation, SANDBOX_LABEL),
                    strength=STRONG,
                    reason=f"the OS sandbox enforces it (the CLI alone: {e.strength}; {e.reason})",
                    enforcer="both" if e.translation else "sandbox",
                )
            )
        else:
            out.append(e)
    return out


def nest(tool: str, translation: Translation) -> bool:
    """Make ``translation`` run inside charter's sandbox; True when the CLI's own sandbox
    was read-only (charter's must then be read-only too).

    Codex runs every command in its own bubblewrap sandbox, which cannot start inside
    charter's (``bwrap: setting up uid map: Operation not permitted``: no nested user
    namespace), so every shell command would fail. Inside charter's sandbox, which is
    built from the whole policy (paths and network), codex's is switched off
    (``--sandbox=danger-full-access``; approvals unchanged) and each element it held is
    held by charter's instead.
    """
    if tool != "codex":
        return False
    read_only = "--sandbox=read-only" in translation.args
    args: list[str] = []
    for arg in translation.args:
        if arg.startswith("--sandbox="):
            args.append("--sandbox=danger-full-access")
        elif not arg.startswith("--config=sandbox_workspace_write."):
            args.append(arg)
    translation.args = list(dict.fromkeys(args))
    if translation.permission_mode:  # say what is passed: codex's sandbox is off
        approval = translation.permission_mode.partition(", ")[2]
        translation.permission_mode = ", ".join(
            filter(None, ("danger-full-access inside charter's sandbox", approval))
        )
    moved: list[Element] = []
    for e in translation.elements:
        held = [
            x for x in e.translation if x.startswith("--sandbox=") or x == "network_access=false"
        ]
        if not held:
            moved.append(e)
            continue
        rest = tuple(
            x
            for x in e.translation
            if x not in held and not x.startswith("--config=sandbox") and x != SANDBOX_LABEL
        )
        # one reason, not one wrapped in another (enforced_by_sandbox may have wrapped it)
        alone = e.reason.split("; codex alone: ", 1)[-1]
        if alone.startswith("the OS sandbox enforces it (the CLI alone: "):
            alone = alone[len("the OS sandbox enforces it (the CLI alone: ") : -1]
        moved.append(
            dataclasses.replace(
                e,
                translation=(*rest, SANDBOX_LABEL),
                enforcer="both" if rest else "sandbox",
                reason=f"charter's OS sandbox holds it (codex's own sandbox cannot run "
                f"inside it and is off); codex alone: {alone}",
            )
        )
    translation.elements = moved
    return read_only


def spec(
    policy: Policy,
    tool: str,
    env: Mapping[str, str],
    home: str,
    tmpdir: str,
    reasons: list[str],
    *,
    read_only: bool = False,
    state_read: Sequence[str] = (),
    workspace: str | None = None,
    own_state: Sequence[str] = (),
) -> dict[str, Any]:
    """What the runner needs to build the sandbox (JSON: it goes into the launch cache).

    ``read_only`` makes nothing writable but the CLI's own state and temp dirs (the
    nested CLI's read-only sandbox, carried over)."""
    if read_only:
        paths = dataclasses.replace(policy.paths, write=policy.paths.write.intersect(Rules(((),))))
        policy = dataclasses.replace(policy, paths=paths)
    return {
        "policy": sandbox_policy(policy, tool, env, home).to_dict(),
        # the CLI's state is moved into the temp dir (redirect_state): nothing of the
        # user's is writable beyond what the policy allows
        # (the state dirs inside it named: a ".gemini" there is the CLI's own, not one
        # that runs later, charter.sandbox.profile's own trees)
        "extra_writable": [tmpdir, *own_state],
        "state_read": list(state_read),
        # files that run later the persona allows writing by name (charter.launch.planted)
        "runs_later_allowed": allowed_by_name(
            policy.paths.for_access("write").allow, workspace or os.getcwd(), home
        ),
        "reasons": reasons,
        # the dimensions that make a missing sandbox a refusal (charter.sandbox.sandbox_for)
        "needed": [
            name
            for name, rules in (("paths", policy.paths), ("network", policy.network))
            if rules.restricted
        ],
    }


__all__ = [
    "ENDPOINTS",
    "SANDBOX_MODES",
    "decide_mode",
    "enforced_by_sandbox",
    "endpoint_hosts",
    "gap_elements",
    "inexact_allows",
    "redirect_state",
    "sandbox_policy",
    "spec",
    "wanted",
]
