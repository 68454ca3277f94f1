from __future__ import annotations

import asyncio

import pytest

from charter.policy import (
    AgentScope,
    Frame,
    ScopeViolation,
    ToolAnnotations,
    ToolCall,
    builtin_annotations,
    decide,
    decide_resource,
    effective,
    with_execution_policy,
    with_scoped_executor,
)


def test_unscoped_agent_is_unrestricted_except_delegation() -> None:
    scope = AgentScope()
    assert scope.whitelist() is None
    assert scope.prompt_block() == ""
    frames = [Frame(scope.policy(), "scope")]
    assert decide(ToolCall("anything", {}, ToolAnnotations()), frames).allowed
    assert decide_resource("members", "writer", frames).denied  # empty members = no delegation
    assert decide_resource("skills", "any", frames).allowed
    assert decide_resource("mcp_servers", "any", frames).allowed


def test_whitelist_computation() -> None:
    scope = AgentScope(skills=("check-feeds",), mcps=("search",), members=("writer",), memory=True)
    assert scope.whitelist() == (
        "bash",
        "ask_user",
        "recall",
        "remember",
        "memory",
        "forget",
        "skill",
        "mcp",
        "delegate",
    )
    frames = [Frame(scope.policy(), "scope")]
    assert decide(ToolCall("search__query"), frames).allowed
    assert decide(ToolCall("other__query"), frames).denied
    assert decide(ToolCall("write", {}, ToolAnnotations()), frames).denied
    assert decide_resource("skills", "check-feeds", frames).allowed
    assert decide_resource("skills", "deploy", frames).denied
    assert decide_resource("members", "writer", frames).allowed
    assert decide_resource("members", "researcher", frames).denied
    only_skills = AgentScope(skills=("a",))
    assert only_skills.whitelist() == ("bash", "ask_user", "skill")


def test_tools_only_scope() -> None:
    scope = AgentScope(tools=("Read", "grep"))
    assert scope.whitelist() == ("read", "grep")
    assert decide(ToolCall("bash", {}, ToolAnnotations()), [Frame(scope.policy(), "s")]).denied


def test_prompt_block_matches_seed() -> None:
    scope = AgentScope(
        skills=("check-feeds", "summarize"), mcps=("search",), members=("researcher", "writer")
    )
    assert scope.prompt_block() == (
        "<scope>\nskills: check-feeds, summarize\nmcp servers: search\n"
        "members: researcher, writer\n</scope>"
    )


def test_scoped_executor_short_circuits_and_decorates() -> None:
    ran: list[str] = []

    def executor(call: ToolCall) -> dict[str, object]:
        ran.append(call.name)
        return {"ok": True}

    scoped = with_scoped_executor(
        executor, stage="research", allowed_tools=["read", "grep"], side_effect_level="read_only"
    )
    grep = ToolCall("grep", {"pattern": "x", "path": "."}, builtin_annotations("grep"))
    result = scoped(grep)
    assert result["ok"] is True
    assert result["audit"]["scope"] == {
        "stage": "research",
        "allowed_tools": ["read", "grep"],
        "side_effect_level": "read_only",
    }
    denied = scoped(ToolCall("write", {"file_path": "a"}, builtin_annotations("write")))
    assert denied["status"] == "scope_violation"
    assert denied["audit"]["scope"]["stage"] == "research"
    assert denied["audit"]["scope"]["rule"] == "tools.allow"
    assert ran == ["grep"]


def test_scoped_executor_intersects_with_ambient_and_can_raise() -> None:
    scoped = with_scoped_executor(
        lambda c: "raw", allowed_tools=["bash", "read"], on_violation="raise"
    )
    with with_execution_policy({"tools": ["read"]}, label="persona"):
        with pytest.raises(ScopeViolation) as info:
            scoped(ToolCall("bash", {}, ToolAnnotations()))
        assert info.value.receipt["frame"] == "persona"
        ok = scoped(ToolCall("read", {}, ToolAnnotations(side_effect_level=None)))
        assert ok == {
            "status": "ok",
            "result": "raw",
            "audit": {
                "scope": {"stage": None, "allowed_tools": ["read"], "side_effect_level": None}
            },
        }
    with pytest.raises(ValueError):
        with_scoped_executor(lambda c: 1, on_violation="ignore")


def test_scoped_executor_async() -> None:
    async def executor(call: ToolCall) -> dict[str, object]:
        return {"value": call.name}

    scoped = with_scoped_executor(executor, {"tools": ["read"]})
    assert asyncio.run(scoped(ToolCall("read")))["value"] == "read"
    assert asyncio.run(scoped(ToolCall("bash")))["status"] == "scope_violation"


def test_effective_reduces_literal_intersections() -> None:
    from charter.policy import Policy

    frames = [
        Frame(Policy.from_dict({"tools": ["read", "grep", "github__*"]}), "a"),
        Frame(Policy.from_dict({"tools": ["read", "github__list", "bash"]}), "b"),
    ]
    view = effective(frames)
    assert view["tools"]["allow"] == ["read", "github__list"]
    both_globs = [
        Frame(Policy.from_dict({"tools": ["a*"]}), "a"),
        Frame(Policy.from_dict({"tools": ["*b"]}), "b"),
    ]
    assert effective(both_globs)["tools"]["allow_all_of"] == [["a*"], ["*b"]]
    assert effective([])["active"] is False
