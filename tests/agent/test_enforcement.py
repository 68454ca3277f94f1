from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from charter.agent import (
    MockProvider,
    Skill,
    agent_loop,
    builtin_tools,
    current_persona_run,
    persona,
    step,
)
from charter.agent.suspension import TOOL as LIFECYCLE
from charter.policy import (
    AgentScope,
    Policy,
    ScopeViolation,
    ToolCall,
    current_stack,
    with_execution_policy,
    with_scoped_executor,
)

from .conftest import Recorder, tc


def _tool_messages(result: Any) -> list[str]:
    return [m["content"] for m in result.transcript["messages"] if m["role"] == "tool"]


def test_policy_denied_call_never_reaches_handler(rec: Recorder) -> None:
    provider = MockProvider([tc("deploy"), tc("look"), "done"])
    result = agent_loop(
        "x",
        provider=provider,
        tools=[rec.tool("deploy", level="network"), rec.tool("look")],
        policy={"side_effect_level": "read_only"},
    )
    assert rec.names() == ["look"]
    assert result.tools.rejected == ["deploy"] and result.tools.successful == ["look"]
    assert result.tools.calls == ["deploy", "look"]
    receipt = result.trace["events"][0]
    assert receipt["status"] == "permission_denied"
    obs = _tool_messages(result)[0]
    assert '"error": "permission_denied"' in obs and '"dimension": "side_effect_level"' in obs
    assert '"frame": "agent_loop"' in obs
    # the stack is popped after the loop
    assert current_stack() == ()


def test_unannotated_tool_counts_as_network(rec: Recorder) -> None:
    from charter.agent import make_tool

    ran: list[int] = []
    mystery = make_tool(lambda: ran.append(1), name="mystery")
    result = agent_loop(
        "x",
        provider=MockProvider([tc("mystery"), "done"]),
        tools=[mystery],
        policy={"side_effect_level": "process_exec"},
    )
    assert ran == [] and result.tools.rejected == ["mystery"]


def test_denied_tools_are_hidden_from_the_model(rec: Recorder) -> None:
    provider = MockProvider(["done"])
    agent_loop(
        "x",
        provider=provider,
        tools=[rec.tool("look"), rec.tool("bash", level="process_exec")],
        policy={"tools": {"deny": ["bash"]}},
    )
    assert [t["name"] for t in provider.requests[0].tools if t["name"] != LIFECYCLE] == ["look"]


def test_ambient_stack_intersects_with_loop_policy(rec: Recorder) -> None:
    provider = MockProvider([tc("write_file"), "done"])
    with with_execution_policy({"side_effect_level": "read_only"}, label="outer"):
        result = agent_loop(
            "x",
            provider=provider,
            tools=[rec.tool("write_file", level="workspace_write")],
            policy={"side_effect_level": "network"},
        )
    assert rec.calls == []
    assert '"frame": "outer"' in _tool_messages(result)[0]


def test_builtins_confined_to_workspace(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("hello\nworld\n")
    (ws / ".env").write_text("SECRET=1\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("nope")
    provider = MockProvider(
        [
            tc("read", path="a.txt"),
            tc("read", path=str(outside)),
            tc("read", path="../outside.txt"),
            tc("read", path=".env"),
            tc("write", path="b.txt", content="new"),
            tc("edit", path="b.txt", old_string="new", new_string="newer"),
            tc("glob", pattern="*.txt"),
            tc("grep", pattern="SECRET|hello"),
            tc("write", path="../escape.txt", content="x"),
            "done",
        ]
    )
    result = agent_loop("x", provider=provider, tools=builtin_tools(str(ws)), workspace=str(ws))
    obs = _tool_messages(result)
    assert obs[0] == "hello\nworld"
    assert all("permission_denied" in o for o in obs[1:4])
    assert (ws / "b.txt").read_text() == "newer"
    assert '"a.txt"' in obs[6] and '"b.txt"' in obs[6]
    assert "a.txt:1:hello" in obs[7] and "SECRET" not in obs[7]  # grep skips denied files
    assert "permission_denied" in obs[8] and not (tmp_path / "escape.txt").exists()


def test_bash_commands_decided_by_policy(tmp_path: Path) -> None:
    provider = MockProvider([tc("bash", command="echo hi"), tc("bash", command="rm -rf x"), "done"])
    result = agent_loop(
        "x",
        provider=provider,
        tools=builtin_tools(str(tmp_path), names=("bash",)),
        workspace=str(tmp_path),
        policy={"commands": {"allow": ["echo:*"]}},
    )
    obs = _tool_messages(result)
    assert '"stdout": "hi\\n"' in obs[0]
    assert "permission_denied" in obs[1] and '"dimension": "commands"' in obs[1]


def test_ask_user_builtin(tmp_path: Path) -> None:
    provider = MockProvider([tc("ask_user", question="which?"), "ok"])
    result = agent_loop(
        "x",
        provider=provider,
        tools=builtin_tools(str(tmp_path), ask_user=lambda q: "blue", names=("ask_user",)),
        workspace=str(tmp_path),
    )
    assert _tool_messages(result) == ["blue"]


# -- AgentScope: the four dispatch points ----------------------------------------------


def test_scope_whitelist_prompt_block_and_forbidden_tool(rec: Recorder) -> None:
    scope = AgentScope(tools=("read",), members=("researcher",), mcps=("search",))
    provider = MockProvider([tc("secret_tool"), tc("read"), "done"])
    result = agent_loop(
        "x",
        "base",
        provider=provider,
        scope=scope,
        tools=[rec.tool("secret_tool"), rec.tool("read"), rec.tool("bash", "process_exec")],
        members={"researcher": lambda task: "found"},
    )
    system = provider.requests[0].system or ""
    assert (
        "<scope>" in system and "members: researcher" in system and "mcp servers: search" in system
    )
    visible = [t["name"] for t in provider.requests[0].tools]
    assert "secret_tool" not in visible and {"read", "bash", "delegate"} <= set(visible)
    assert rec.names() == ["read"]  # the LLM ignored <scope>; dispatch rejected it
    assert "secret_tool" in result.tools.rejected


def test_scope_forbidden_delegation_target() -> None:
    ran: list[str] = []
    scope = AgentScope(members=("researcher",))
    provider = MockProvider(
        [
            tc("delegate", member="admin", task="drop tables"),
            tc("delegate", member="researcher", task="look"),
            "done",
        ]
    )
    result = agent_loop(
        "x",
        provider=provider,
        scope=scope,
        members={"admin": lambda t: ran.append("admin"), "researcher": lambda t: ran.append("r")},
    )
    assert ran == ["r"]
    obs = _tool_messages(result)
    assert "permission_denied" in obs[0] and '"dimension": "members"' in obs[0]


def test_no_members_means_no_delegation() -> None:
    ran: list[str] = []
    provider = MockProvider([tc("delegate", member="w", task="t"), "done"])
    agent_loop(
        "x",
        provider=provider,
        scope=AgentScope(tools=("delegate",)),
        members={"w": lambda t: ran.append("w")},
    )
    assert ran == []


def test_delegate_handler_rechecks_resource() -> None:
    """Even if the tool call is allowed, activation decides the member again."""
    from charter.agent import delegate_tool

    ran: list[str] = []
    tool = delegate_tool({"w": lambda t: ran.append(t)})

    async def go() -> Any:
        with with_execution_policy({"members": []}, label="no-members"):
            return await tool.handler(member="w", task="t")

    out = asyncio.run(go())
    assert out["error"] == "permission_denied" and ran == []


def test_delegation_to_child_agent_inherits_ceiling(rec: Recorder) -> None:
    child_provider = MockProvider([tc("write_file"), "child done"])
    members = {
        "writer": {
            "provider": child_provider,
            "tools": [rec.tool("write_file", "workspace_write")],
            "system": "child",
        }
    }
    provider = MockProvider([tc("delegate", member="writer", task="write it"), "done"])
    result = agent_loop(
        "x",
        provider=provider,
        members=members,
        policy={"side_effect_level": "read_only", "members": ["writer"]},
    )
    assert rec.calls == []  # the parent's read-only ceiling holds inside the child
    assert '"child_status": "done"' in _tool_messages(result)[0]


def test_scope_forbidden_skill() -> None:
    skills = [Skill("deploy", "ship it", "Follow the runbook."), Skill("triage", "t", "Triage.")]
    provider = MockProvider([tc("skill", name="deploy"), tc("skill", name="triage"), "done"])
    result = agent_loop("x", provider=provider, skills=skills, scope=AgentScope(skills=("triage",)))
    obs = _tool_messages(result)
    assert "permission_denied" in obs[0] and '"dimension": "skills"' in obs[0]
    assert '"activated": "triage"' in obs[1]
    third_system = provider.requests[2].system or ""
    assert "Triage." in third_system and "Follow the runbook." not in third_system


def test_scope_forbidden_mcp_server_tool(rec: Recorder) -> None:
    evil = rec.tool("evil__wipe", level="none", mcp_server="evil")
    good = rec.tool("search__find", level="read_only", mcp_server="search")
    provider = MockProvider([tc("evil__wipe"), tc("search__find"), "done"])
    result = agent_loop(
        "x", provider=provider, tools=[evil, good], scope=AgentScope(mcps=("search",))
    )
    assert rec.names() == ["search__find"]
    assert '"dimension": "mcp_servers"' in _tool_messages(result)[0] or (
        "permission_denied" in _tool_messages(result)[0]
    )


# -- with_scoped_executor as tool-caller middleware ----------------------------------------


def test_scoped_executor_reject_and_raise(rec: Recorder) -> None:
    tools = [rec.tool("look"), rec.tool("edit_file", "workspace_write")]
    provider = MockProvider([tc("edit_file"), tc("look"), "done"])
    result = agent_loop(
        "x",
        provider=provider,
        tools=tools,
        tool_caller=lambda ex: with_scoped_executor(
            ex, stage="research", allowed_tools=["look"], side_effect_level="read_only"
        ),
    )
    assert rec.names() == ["look"]
    assert result.tools.rejected == ["edit_file"]
    audit = result.trace["events"][0]
    assert audit["status"] == "scope_violation"
    obs = _tool_messages(result)
    assert '"status": "scope_violation"' in obs[0] and '"stage": "research"' in obs[0]
    assert '"audit"' in obs[1]  # allowed results carry audit.scope

    provider = MockProvider([tc("edit_file"), "done"])
    with pytest.raises(ScopeViolation):
        agent_loop(
            "x",
            provider=provider,
            tools=tools,
            tool_caller=lambda ex: with_scoped_executor(
                ex, allowed_tools=["look"], on_violation="raise"
            ),
        )
    assert current_stack() == ()


def test_scoped_executor_middleware_form(rec: Recorder) -> None:
    """Seed form: ``tool_caller=with_scoped_executor({...})`` (a policy dict or Policy)."""
    tools = [rec.tool("look"), rec.tool("edit_file", "workspace_write")]
    for scope in ({"tools": ["look"]}, Policy.from_dict({"tools": ["look"]}), None):
        rec.calls.clear()
        kwargs = {"allowed_tools": ["look"]} if scope is None else {}
        result = agent_loop(
            "x",
            provider=MockProvider([tc("edit_file"), tc("look"), "done"]),
            tools=tools,
            tool_caller=with_scoped_executor(scope, **kwargs),
        )
        # hostile: the handler never ran; allowed twin: it did
        assert rec.names() == ["look"]
        assert result.trace["events"][0]["status"] == "scope_violation"
        assert '"audit"' in _tool_messages(result)[1]


def test_scoped_executor_takes_the_stage_vocabulary_in_its_dict(rec: Recorder) -> None:
    """``with_scoped_executor({allowed_tools, side_effect_level, stage})`` (seed 000)."""
    tools = [rec.tool("look"), rec.tool("edit_file", "workspace_write"), rec.tool("fetch")]
    scope = {"allowed_tools": ["look", "fetch"], "side_effect_level": "read_only", "stage": "plan"}
    provider = MockProvider([tc("edit_file"), tc("fetch"), tc("look"), "done"])
    result = agent_loop(
        "x", provider=provider, tools=tools, tool_caller=with_scoped_executor(scope)
    )
    assert rec.names() == ["fetch", "look"]  # edit_file never ran: not in allowed_tools
    statuses = [e["status"] for e in result.trace["events"] if e["type"] == "tool_call_audit"]
    assert statuses == ["scope_violation", "ok", "ok"]
    obs = _tool_messages(result)
    assert '"stage": "plan"' in obs[0] and '"allowed_tools": ["look", "fetch"]' in obs[1]
    # side_effect_level: a network tool in the allowed list is still refused above read_only
    rec.calls.clear()
    net = [rec.tool("look"), rec.tool("fetch", "network")]
    provider = MockProvider([tc("fetch"), tc("look"), "done"])
    agent_loop("x", provider=provider, tools=net, tool_caller=with_scoped_executor(scope))
    assert rec.names() == ["look"]
    with pytest.raises(TypeError, match="allowed_tools given twice"):
        with_scoped_executor({"allowed_tools": ["a"]}, allowed_tools=["b"])


def test_scoped_executor_wrong_arguments_are_type_errors(rec: Recorder) -> None:
    with pytest.raises(TypeError, match=r"expected an executor \(callable\) or a policy"):
        with_scoped_executor(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="policy must be a Policy or dict"):
        with_scoped_executor(lambda call: call, ["look"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a second positional policy"):
        with_scoped_executor({"tools": ["look"]}, {"tools": []})
    with pytest.raises(TypeError, match="call it with the executor to wrap"):
        with_scoped_executor({"tools": ["look"]})({"tools": []})
    # the old mistake: a scoped executor passed where middleware goes
    scoped = with_scoped_executor(lambda call: call, allowed_tools=["look"])
    with pytest.raises(TypeError, match="expected a ToolCall, got callable") as err:
        agent_loop(
            "x",
            provider=MockProvider([tc("look"), "done"]),
            tools=[rec.tool("look")],
            tool_caller=scoped,
        )
    assert "has_subjects" not in str(err.value)
    assert rec.names() == []


# -- @persona / @step ------------------------------------------------------------------------


def test_persona_stages_push_and_pop(rec: Recorder) -> None:
    tools = [rec.tool("github"), rec.tool("ci", "process_exec")]
    seen: dict[str, Any] = {}

    @step("research")
    def research() -> Any:
        seen["research_kinds"] = [f.kind for f in current_stack()]
        return agent_loop("r", provider=MockProvider([tc("ci"), tc("github"), "done"]), tools=tools)

    @step("act")
    def act() -> Any:
        return agent_loop("a", provider=MockProvider([tc("ci"), "done"]), tools=tools)

    @persona(
        "scoped",
        tools=["github", "ci"],
        stages=[
            {
                "name": "research",
                "allowed_tools": ["github"],
                "side_effect_level": "read_only",
                "on_exit": {"on_complete": "act"},
            },
            {"name": "act", "allowed_tools": ["github", "ci"], "side_effect_level": "process_exec"},
        ],
    )
    def workflow() -> tuple[Any, Any]:
        return research(), act()

    r1, r2 = workflow()
    assert seen["research_kinds"] == ["persona", "stage"]
    assert r1.tools.rejected == ["ci"] and r2.tools.successful == ["ci"]
    assert rec.names() == ["github", "ci"]
    assert current_stack() == ()
    receipts = workflow.last_run.receipts  # type: ignore[attr-defined]
    assert [r["stage"] for r in receipts] == ["research", "act"]
    assert receipts[0]["on_exit"] == {"on_complete": "act"}
    assert receipts[0]["next_stage_hint"] == "act" and receipts[0]["outcome"] == "complete"


def test_step_pops_on_error_and_outside_persona() -> None:
    @step("s")
    def boom() -> None:
        assert current_stack()[-1].stage == "s"
        raise RuntimeError("x")

    @persona("p", stages=[{"name": "s", "allowed_tools": []}])
    def wf() -> None:
        boom()

    with pytest.raises(RuntimeError):
        wf()
    assert current_stack() == ()
    assert wf.last_run.receipts[0]["outcome"] == "failure"  # type: ignore[attr-defined]

    @step("free")
    def free() -> Any:
        return current_stack(), current_persona_run()

    assert free() == ((), None)


def test_persona_validation() -> None:
    with pytest.raises(ValueError, match="not in the persona"):
        persona("p", tools=["a"], stages=[{"name": "s", "allowed_tools": ["b"]}])
    with pytest.raises(ValueError, match="two stages"):
        persona("p", stages=[{"name": "s"}, {"name": "s"}])
    with pytest.raises(ValueError, match="unknown stage"):
        persona("p", stages=[{"name": "s", "on_exit": {"on_failure": "zzz"}}])
    with pytest.raises(ValueError):
        persona("p", stages=[{"name": "s", "side_effect_level": "huge"}])


def test_async_step() -> None:
    @step("s")
    async def inner() -> str:
        return current_stack()[-1].label

    @persona("p", stages=[{"name": "s", "side_effect_level": "none"}])
    async def wf() -> str:
        return await inner()

    assert asyncio.run(wf()) == "stage:s"


def test_scoped_executor_directly() -> None:
    def ex(call: ToolCall) -> str:
        return "ran"

    wrapped = with_scoped_executor(ex, allowed_tools=["a"])
    assert wrapped(ToolCall("b"))["status"] == "scope_violation"
