"""Property tests of the policy algebra (hypothesis)."""

from __future__ import annotations

import tempfile
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from charter.policy import (
    LEVEL_NAMES,
    Frame,
    Policy,
    SideEffectLevel,
    ToolAnnotations,
    ToolCall,
    decide,
    make_context,
)
from charter.policy.paths import SENSITIVE_PATHS

CTX = make_context(
    tempfile.mkdtemp(prefix="charter-prop-ws-"), tempfile.mkdtemp(prefix="charter-prop-home-")
)

TOOL_NAMES = ["read", "write", "bash", "grep", "github__list", "github__merge", "slack__post"]
TOOL_PATTERNS = [*TOOL_NAMES, "*", "github__*", "gr*", "*__post", "re?d"]
PATHS = [
    "src/a.py",
    "src/deep/b.py",
    "docs/x.md",
    ".env",
    "secrets/k",
    "/etc/passwd",
    "~/notes",
    "~/.ssh/id",
]
PATH_PATTERNS = [
    "./",
    "./src",
    "./src/**",
    "./docs",
    "secrets",
    "*.py",
    "/etc",
    "~",
    "*",
    "./secrets/**",
]
COMMANDS = [
    "git status",
    "git push --force",
    "rm -rf x",
    "rm x",
    "npm test",
    "curl x",
    "ls | grep y",
    "timeout 3 curl x",
    "bash -c 'git log'",
]
COMMAND_RULES = [
    "git:*",
    "git push --force:*",
    "rm -rf:*",
    "rm:*",
    "npm test",
    "curl:*",
    "ls:*",
    "grep:*",
    "*",
    "bash:*",
]
URLS = [
    "https://a.example.com/x",
    "https://example.com",
    "https://api.github.com",
    "http://10.0.0.1",
]
DOMAIN_RULES = ["*", "*.example.com", "example.com", "api.github.com"]
SKILLS = ["summarize", "deploy", "triage"]


def _subset(patterns: list[str], mask: int) -> list[str]:
    return [p for i, p in enumerate(patterns) if mask >> i & 1]


# Bit masks keep generation cheap (a handful of draws per policy) while covering the
# omitted / short-form / allow+deny / explicit-empty cases of every dimension.
@st.composite
def policies(draw: st.DrawFn) -> Policy:
    data: dict[str, Any] = {}
    for key, pats in (
        ("tools", TOOL_PATTERNS),
        ("paths", PATH_PATTERNS),
        ("commands", COMMAND_RULES),
        ("network", DOMAIN_RULES),
        ("skills", [*SKILLS, "*"]),
    ):
        form = draw(st.integers(0, 5))
        if form <= 1:
            continue  # omitted (twice as likely)
        full = (1 << len(pats)) - 1
        allow = _subset(pats, draw(st.integers(0, full)))
        if form == 2:
            data[key] = allow[:4]
        elif form == 3:
            data[key] = {"deny": _subset(pats, draw(st.integers(0, full)))[:3]}
        else:
            data[key] = {"allow": allow[:4], "deny": _subset(pats, draw(st.integers(0, full)))[:3]}
    level = draw(st.integers(-1, len(LEVEL_NAMES) - 1))
    if level >= 0:
        data["side_effect_level"] = LEVEL_NAMES[level]
    names = list(SENSITIVE_PATHS)
    lifted = _subset(names, draw(st.integers(0, (1 << len(names)) - 1)))
    if lifted:
        data["allow_sensitive"] = lifted
    return Policy.from_dict(data)


@st.composite
def calls(draw: st.DrawFn) -> ToolCall:
    name = draw(st.sampled_from(TOOL_NAMES))
    level = draw(st.one_of(st.none(), st.sampled_from(list(SideEffectLevel))))
    args: dict[str, Any] = {}
    ann: dict[str, Any] = {"side_effect_level": level}
    which = draw(st.sampled_from(["none", "path", "command", "url", "skill"]))
    if which == "path":
        args["p"] = draw(st.sampled_from(PATHS))
        ann["path_args"] = ("p",)
        ann["kind"] = draw(st.sampled_from([None, "read", "edit"]))
    elif which == "command":
        args["c"] = draw(st.sampled_from(COMMANDS))
        ann["command_args"] = ("c",)
    elif which == "url":
        args["u"] = draw(st.sampled_from(URLS))
        ann["url_args"] = ("u",)
    elif which == "skill":
        args["s"] = draw(st.sampled_from(SKILLS))
        ann["skill_args"] = ("s",)
    return ToolCall(name, args, ToolAnnotations(**ann))


def allowed(call: ToolCall, *pols: Policy) -> bool:
    return decide(call, [Frame(p, f"f{i}") for i, p in enumerate(pols)], context=CTX).allowed


SETTINGS = settings(max_examples=2000, deadline=None)


# Drawing policies dominates the cost, so one draw checks several laws at once.
@SETTINGS
@given(policies(), policies(), policies(), calls())
def test_policy_algebra(a: Policy, b: Policy, c: Policy, call: ToolCall) -> None:
    ab = allowed(call, a, b)
    # pushing a frame never enlarges the allowed set
    if ab:
        assert allowed(call, a)
    if allowed(call, a, b, c):
        assert ab
    # intersection decides exactly like stacking, commutatively and associatively
    assert allowed(call, a.intersect(b)) == ab
    assert allowed(call, b.intersect(a)) == ab
    assert allowed(call, b, a) == ab
    assert allowed(call, a.intersect(b).intersect(c)) == allowed(call, a.intersect(b.intersect(c)))
    assert allowed(call, a.intersect(b).intersect(c)) == allowed(call, a, b, c)
    # the dict form round-trips
    again = Policy.from_dict(a.to_dict())
    assert again == a
    assert allowed(call, again) == allowed(call, a)


@SETTINGS
@given(policies(), st.sampled_from(TOOL_NAMES), st.sampled_from(TOOL_PATTERNS))
def test_deny_wins_over_allow(base: Policy, name: str, pattern: str) -> None:
    call = ToolCall(name, {}, ToolAnnotations(SideEffectLevel.NONE))
    denying = Policy.from_dict({"tools": {"allow": ["*", pattern], "deny": [pattern]}})
    import fnmatch

    if fnmatch.fnmatchcase(name, pattern):
        assert not allowed(call, base, denying)
        assert not allowed(call, denying, base)


@SETTINGS
@given(st.sampled_from(TOOL_NAMES), st.sampled_from(list(SideEffectLevel)))
def test_empty_allow_list_versus_omitted(name: str, level: SideEffectLevel) -> None:
    call = ToolCall(name, {}, ToolAnnotations(level))
    assert not allowed(call, Policy.from_dict({"tools": []}))
    assert allowed(call, Policy.from_dict({}))
    assert allowed(call, Policy.from_dict({"tools": {"deny": []}}))


@SETTINGS
@given(
    st.sampled_from(list(SideEffectLevel)),
    st.one_of(st.none(), st.sampled_from(list(SideEffectLevel))),
)
def test_side_effect_ordering(ceiling: SideEffectLevel, level: SideEffectLevel | None) -> None:
    call = ToolCall("t", {}, ToolAnnotations(level))
    effective_level = SideEffectLevel.NETWORK if level is None else level  # fail closed
    pol = Policy.from_dict({"side_effect_level": ceiling.label})
    assert allowed(call, pol) == (effective_level <= ceiling)


@SETTINGS
@given(
    policies(),
    policies(),
    st.lists(st.sampled_from(PATHS), min_size=2, max_size=5),
    st.sampled_from([None, "read", "edit"]),
    st.one_of(st.none(), st.sampled_from(list(SideEffectLevel))),
)
def test_memoised_verdicts_equal_fresh_ones(
    a: Policy, b: Policy, paths: list[str], kind: str | None, level: SideEffectLevel | None
) -> None:
    """Allowed verdicts of path-only calls are memoised per (stack, annotations, resolved
    targets): on one stack tuple, calls of one tool with varying paths and names decide
    exactly as a fresh list of the same frames does."""
    stack = (Frame(a, "a"), Frame(b, "b"))
    ann = ToolAnnotations(level, kind=kind, path_args=("p",))
    for name in ("read", "write", "read"):
        for path in paths:
            call = ToolCall(name, {"p": path}, ann)
            fresh = decide(call, list(stack), context=CTX)
            assert decide(call, stack, context=CTX).to_dict() == fresh.to_dict()
