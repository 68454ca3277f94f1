"""Children are narrower by construction: policy and budget, for random parents and children."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from charter.agent.subagents import TokenLedger, child_policy
from charter.policy import Frame, Policy, ToolCall, decide

from ..policy.test_properties import CTX, calls, policies

MCP = ["github", "slack", "*"]
MEMBERS = ["researcher", "writer", "admin", "*"]


@st.composite
def full_policies(draw: st.DrawFn) -> Policy:
    """The policy-algebra generator plus the mcp_servers and members dimensions."""
    base = draw(policies())
    extra: dict[str, Any] = {}
    for key, pool in (("mcp_servers", MCP), ("members", MEMBERS)):
        form = draw(st.integers(0, 3))
        if form == 1:
            extra[key] = draw(st.lists(st.sampled_from(pool), max_size=2, unique=True))
        elif form == 2:
            extra[key] = {"deny": draw(st.lists(st.sampled_from(pool), min_size=1, max_size=2))}
    return base.intersect(Policy.from_dict(extra)) if extra else base


@st.composite
def full_calls(draw: st.DrawFn) -> ToolCall:
    call = draw(calls())
    which = draw(st.sampled_from(["as_is", "member", "mcp"]))
    if which == "member":
        ann = dataclasses.replace(call.annotations, member_args=("m",))
        return ToolCall(call.name, {**call.arguments, "m": draw(st.sampled_from(MEMBERS[:3]))}, ann)
    if which == "mcp":
        ann = dataclasses.replace(call.annotations, mcp_server=draw(st.sampled_from(MCP[:2])))
        return ToolCall(call.name, call.arguments, ann)
    return call


def _frames(pols: Sequence[Policy], kind: str = "ambient") -> list[Frame]:
    return [Frame(p, f"{kind}{i}", kind) for i, p in enumerate(pols)]


def _allowed(call: ToolCall, frames: Sequence[Frame]) -> bool:
    return decide(call, frames, context=CTX).allowed


Intersection = Callable[[Sequence[Frame], Policy], Policy]


def narrower_by_construction(intersection: Intersection) -> Callable[..., None]:
    @settings(max_examples=600, deadline=None)
    @given(
        st.lists(full_policies(), min_size=1, max_size=3),
        full_policies(),
        st.lists(full_calls(), min_size=1, max_size=6),
    )
    def prop(parent: list[Policy], request: Policy, probes: list[ToolCall]) -> None:
        stack = _frames(parent)
        child = intersection(stack, request)
        for call in probes:
            parent_ok = _allowed(call, stack)
            # the child's single computed policy (what a persisted worker carries)
            if _allowed(call, [Frame(child, "child", "worker")]):
                assert parent_ok, (call, child.to_dict())
            # the child as it runs: the parent's frames with its request pushed on top
            if _allowed(call, [*stack, Frame(request, "request", "sub_agent")]):
                assert parent_ok
                assert _allowed(call, [Frame(child, "child", "worker")])

    return prop


test_child_policy_is_a_subset_of_the_parent = narrower_by_construction(child_policy)


def test_a_mutated_intersection_turns_red() -> None:
    """The property can fail: a child that takes its request as its policy is caught."""
    mutant = narrower_by_construction(lambda parent, request: request)
    with pytest.raises(AssertionError):
        mutant()


@settings(max_examples=2000, deadline=None)
@given(
    st.one_of(st.none(), st.integers(0, 10_000)),
    st.integers(0, 10_000),
    st.lists(st.one_of(st.none(), st.integers(0, 10_000)), min_size=1, max_size=8),
)
def budget_property(limit: int | None, used: int, requests: list[int | None]) -> None:
    parent = TokenLedger(limit, used=min(used, limit) if limit is not None else used)
    children = []
    for requested in requests:
        before = parent.remaining
        child = parent.reserve(requested, "c")
        children.append(child)
        if before is not None:
            # never more than the parent has left, so concurrent children together
            # never exceed the parent's limit
            assert child.limit is not None and child.limit <= before
            assert limit is not None and parent.used + parent.reserved <= limit
        if requested is not None:
            assert child.limit is not None and child.limit <= requested
    for child in children:
        child.charge(child.limit if child.limit is not None else 5)
        parent.settle(child)
    assert parent.reserved == 0
    if limit is not None:
        assert parent.used <= limit


def test_child_budget_never_exceeds_what_is_left() -> None:
    budget_property()


def test_a_mutated_budget_turns_red(monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget property can fail: a child granted what it asks for is caught."""
    from charter.agent import subagents

    monkeypatch.setattr(subagents, "child_budget", lambda left, requested: requested)
    with pytest.raises(AssertionError):
        budget_property()


NAMES = ["read", "write", "grep", "deploy", "github__merge"]
LEVELS = {
    "read": "read_only",
    "write": "workspace_write",
    "grep": "read_only",
    "deploy": "network",
    "github__merge": "network",
}


@settings(max_examples=150, deadline=None)
@given(
    st.lists(full_policies(), min_size=1, max_size=2),
    st.one_of(st.none(), st.lists(st.sampled_from(NAMES), unique=True)),
    st.lists(st.sampled_from(NAMES), min_size=1, max_size=5),
)
def test_a_running_child_never_executes_what_the_parent_denies(
    parent: list[Policy], allowed: list[str] | None, attempts: list[str]
) -> None:
    """End to end: a mock child tries random tools; every handler that ran is one the
    parent's stack alone would have allowed."""
    from charter.agent import MockProvider, make_tool
    from charter.agent.subagents import sub_agent_run
    from charter.policy import with_execution_policy

    ran: list[str] = []

    def handler(name: str) -> Callable[[], str]:
        def run() -> str:
            ran.append(name)
            return "ok"

        return run

    tools = [
        make_tool(handler(n), name=n, side_effect_level=LEVELS[n], parameters={"type": "object"})
        for n in NAMES
    ]
    script: list[Any] = [{"tool_calls": [{"name": n, "arguments": {}}]} for n in attempts]
    frames = _frames(parent)
    with contextlib.ExitStack() as stack:
        for p in parent:
            stack.enter_context(with_execution_policy(p, label="parent"))
        sub_agent_run(
            "x",
            provider=MockProvider([*script, "done"]),
            tools=tools,
            allowed_tools=allowed,
            workspace=str(CTX.workspace),
            max_iterations=len(attempts) + 1,
            tool_surface_narrowing=False,
        )
    for name in ran:
        tool = next(t for t in tools if t.name == name)
        call = ToolCall(name, {}, tool.annotations)
        assert _allowed(call, frames), (name, [p.to_dict() for p in parent])
        assert allowed is None or name in allowed
