"""``charter launch`` inside ``charter.sandbox``: where a CLI cannot enforce, the kernel does.

``--sandbox auto`` (the default) wraps the CLI in bubblewrap whenever the policy has a path
or network element the CLI's own translation rates below ``strong``; ``always`` wraps it
whenever the policy restricts paths or network; ``never`` does not (and then
``--strict-policy`` refuses the gap, as before). A policy saying ``sandbox = "off"``
means ``never`` unless ``--sandbox`` says otherwise.

The sandboxed CLI keeps what it needs: its own state and config directories writable, its
temp files, and its model endpoint: the sandbox's network rules are the persona's with
the endpoint hosts of the CLI (and of any ``*_BASE_URL`` override) allowed, so with
``network.deny = ["*"]`` the CLI still reaches its model through charter's allow-listing
proxy while everything the model asks for elsewhere is refused.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from charter.policy import Policy, Rules, host_of

from .translate import STRONG, Element

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
#: Where each CLI keeps its state and configuration (relative to HOME).
STATE_DIRS: dict[str, tuple[str, ...]] = {
    "claude": (".claude", ".claude.json", ".config/claude"),
    "codex": (".codex",),
    "gemini": (".gemini",),
    "opencode": (".local/share/opencode", ".config/opencode", ".cache/opencode"),
}


def gap_elements(elements: Sequence[Element]) -> list[Element]:
    """Path and network elements the CLI itself enforces less than strongly."""
    return [
        e
        for e in elements
        if e.key.split(".", 1)[0] in ("paths", "network") and e.strength != STRONG
    ]


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


def endpoint_hosts(tool: str, env: Mapping[str, str]) -> list[str]:
    hosts = list(ENDPOINTS.get(tool, ()))
    for var in BASE_URL_VARS:
        if env.get(var):
            try:
                hosts.append(host_of(env[var]))
            except ValueError:
                continue
    return list(dict.fromkeys(hosts))


def sandbox_policy(policy: Policy, tool: str, env: Mapping[str, str]) -> Policy:
    """The persona's policy with the CLI's model endpoints reachable (nothing else added)."""
    net = policy.network
    if not net.restricted:
        return policy
    hosts = endpoint_hosts(tool, env)
    allow = tuple(tuple(dict.fromkeys((*group, *hosts))) for group in net.allow) or (
        (tuple(hosts),) if "*" in net.deny else ()
    )
    deny = tuple(d for d in net.deny if d != "*" and d not in hosts)
    return dataclasses.replace(policy, network=Rules(allow, deny))


def state_paths(tool: str, home: str) -> list[str]:
    return [os.path.join(home, rel) for rel in STATE_DIRS.get(tool, ())]


def enforced_by_sandbox(elements: Sequence[Element], gaps: Sequence[Element]) -> list[Element]:
    """The elements with the gaps now held by the sandbox (strong, enforcer ``both``)."""
    closing = {id(e) for e in gaps}
    out: list[Element] = []
    for e in elements:
        if id(e) in closing:
            out.append(
                dataclasses.replace(
                    e,
                    translation=(*e.translation, "bubblewrap sandbox (charter.sandbox)"),
                    strength=STRONG,
                    reason=f"the OS sandbox enforces it (the CLI alone: {e.strength}; {e.reason})",
                    enforcer="both" if e.translation else "sandbox",
                )
            )
        else:
            out.append(e)
    return out


def spec(
    policy: Policy, tool: str, env: Mapping[str, str], home: str, tmpdir: str, reasons: list[str]
) -> dict[str, Any]:
    """What the runner needs to build the sandbox (JSON: it goes into the launch cache)."""
    return {
        "policy": sandbox_policy(policy, tool, env).to_dict(),
        "extra_writable": [*state_paths(tool, home), tmpdir],
        "reasons": reasons,
    }


__all__ = [
    "ENDPOINTS",
    "SANDBOX_MODES",
    "decide_mode",
    "enforced_by_sandbox",
    "endpoint_hosts",
    "gap_elements",
    "sandbox_policy",
    "spec",
    "wanted",
]
