"""sub_agent_run: the result envelope, narrowing through the policy stack, token budgets."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from charter.agent import AgentOptionError, MockProvider, agent_loop, default_llm_caller
from charter.agent.subagents import (
    _LEDGER,
    TokenLedger,
    run_request,
    sub_agent_request,
    sub_agent_run,
    sub_agent_run_async,
    sub_agent_tool,
    sub_agent_transcript,
)
from charter.policy import current_stack, with_execution_policy

from .conftest import Recorder, tc

SCHEMA = {
    "type": "object",
    "properties": {"paths": {"type": "array", "items": {"type": "string"}}},
    "required": ["paths"],
}


def _usage(entry: Any, tokens: int) -> dict[str, Any]:
    out = {"text": entry} if isinstance(entry, str) else dict(entry)
    out["usage"] = {"input_tokens": tokens, "output_tokens": 0}
    return out


def test_envelope_with_returns_schema(rec: Recorder) -> None:
    provider = MockProvider(
        [_usage(tc("search"), 30), _usage('```json\n{"paths": ["charter.toml"]}\n```', 20)]
    )
    env = sub_agent_run(
        "Find the config entrypoints.",
        provider=provider,
        tools=[rec.tool("search"), rec.tool("read")],
        allowed_tools=["search", "read"],
        token_budget=1200,
        returns={"schema": SCHEMA},
    )
    assert env["ok"] and env["status"] == "done"
    assert env["data"] == {"paths": ["charter.toml"]}
    assert env["tokens_used"] == 50 and env["token_budget"] == 1200
    assert env["budget_exceeded"] is False
    assert (
        env["session_id"].startswith("sub_")
        and env["transcript"]["session_id"] == env["session_id"]
    )
    full = sub_agent_transcript(env["transcript"])
    assert full is not None and len(full["messages"]) == env["transcript"]["messages"] == 4
    # the child was told the schema
    assert '"required": ["paths"]' in str(provider.requests[0].system)
    assert "error" not in env


def test_schema_mismatch_is_an_error() -> None:
    env = sub_agent_run("x", provider=MockProvider(['{"files": []}']), returns={"schema": SCHEMA})
    assert not env["ok"] and env["error"]["category"] == "schema_validation"
    assert "'paths' is a required property" in env["error"]["message"]
    assert "data" not in env


def test_parent_stack_bounds_the_child(rec: Recorder) -> None:
    # hostile: the child asks for write, the parent's stack denies it
    provider = MockProvider([tc("write_file"), tc("read_file"), "done"])
    with with_execution_policy({"tools": {"deny": ["write_file"]}}, label="parent"):
        env = sub_agent_run(
            "edit it",
            provider=provider,
            tools=[rec.tool("read_file"), rec.tool("write_file", level="workspace_write")],
            allowed_tools=["read_file", "write_file"],
        )
    assert rec.names() == ["read_file"]  # the denied handler never ran; the allowed twin did
    assert not env["ok"]
    assert env["error"]["category"] == "permission_denied" and env["error"]["tool"] == "write_file"
    assert "write_file" not in [t["name"] for t in provider.requests[0].tools]
    assert current_stack() == ()


def test_allowed_tools_narrow_below_the_parent(rec: Recorder) -> None:
    provider = MockProvider([tc("deploy"), "done"])
    env = sub_agent_run(
        "x",
        provider=provider,
        tools=[rec.tool("deploy"), rec.tool("read")],
        allowed_tools=["read"],
    )
    assert rec.names() == []
    assert env["error"]["tool"] == "deploy"
    assert [t["name"] for t in provider.requests[0].tools] == ["read"]
    full = sub_agent_transcript(env["transcript"])
    assert full is not None and full["policy"] == {"tools": {"allow": ["read"]}}


def test_token_budget_stops_the_child(rec: Recorder) -> None:
    provider = MockProvider([_usage(tc("read"), 60), _usage(tc("read"), 60), "done"])
    env = sub_agent_run(
        "x", provider=provider, tools=[rec.tool("read")], token_budget=50, loop_until_done=True
    )
    assert env["status"] == "budget_exhausted" and env["budget_exceeded"] is True
    assert env["error"]["category"] == "budget_exceeded"
    assert env["tokens_used"] == 60 and len(provider.requests) == 1


def test_nested_child_gets_what_the_parent_has_left(rec: Recorder) -> None:
    inner = MockProvider([_usage("inner done", 10)])
    outer = MockProvider(
        [
            _usage(tc("sub_agent_run", task="go deeper", token_budget=10_000), 30),
            _usage("outer done", 5),
        ]
    )
    env = sub_agent_run(
        "outer",
        provider=outer,
        tools=[sub_agent_tool([rec.tool("read")], provider=inner)],
        token_budget=100,
    )
    assert env["ok"]
    child_env = sub_agent_transcript(env["transcript"])["messages"][2]["content"]  # type: ignore[index]
    assert '"token_budget": 70' in child_env  # 100 - 30 already used, not 10_000
    assert env["tokens_used"] == 30 + 10 + 5


def test_concurrent_children_reserve_from_the_parent() -> None:
    async def slow(call: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0.05)  # both children are running at once
        return await default_llm_caller()(call)

    async def main() -> list[dict[str, Any]]:
        token = _LEDGER.set(TokenLedger(100))
        try:
            reqs = [
                sub_agent_request(
                    "a", provider=MockProvider([_usage("a", 5)]), token_budget=80, llm_caller=slow
                ),
                sub_agent_request(
                    "b", provider=MockProvider([_usage("b", 5)]), token_budget=80, llm_caller=slow
                ),
            ]
            return list(await asyncio.gather(*(run_request(r) for r in reqs)))
        finally:
            _LEDGER.reset(token)

    a, b = asyncio.run(main())
    assert sorted([a["token_budget"], b["token_budget"]]) == [20, 80]


def test_parent_transcript_holds_only_the_envelope(rec: Recorder) -> None:
    child = MockProvider([tc("read"), "child says hi"])
    parent = MockProvider([tc("sub_agent_run", task="look"), "parent done"])
    result = agent_loop(
        "x", provider=parent, tools=[sub_agent_tool([rec.tool("read")], provider=child)]
    )
    roles = [m["role"] for m in result.transcript["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert "child says hi" in result.transcript["messages"][2]["content"]
    assert result.tools.successful == ["sub_agent_run"] and rec.names() == ["read"]


def test_async_twin_inside_a_running_loop() -> None:
    env = asyncio.run(sub_agent_run_async("x", provider=MockProvider(["ok"])))
    assert env["ok"] and env["summary"] == "ok"


@pytest.mark.parametrize(
    ("options", "where"),
    [
        ({"token_budget": -1}, "token_budget"),
        ({"allowed_tools": "read"}, "allowed_tools"),
        ({"returns": {"schema": {"type": "nope"}}}, "returns.schema.type"),
        ({"returns": []}, "returns"),
        ({"max_iteratons": 3}, "max_iteratons"),
    ],
)
def test_bad_requests_name_the_field(options: dict[str, Any], where: str) -> None:
    with pytest.raises(AgentOptionError) as err:
        sub_agent_run("x", provider=MockProvider(["ok"]), **options)
    assert err.value.option == where


def test_members_reserve_budget_like_sub_agents(rec: Recorder) -> None:
    member = MockProvider([_usage("helped", 10)])
    outer = MockProvider(
        [
            _usage(
                {
                    "tool_calls": [
                        {"name": "delegate", "arguments": {"member": "helper", "task": "t"}}
                    ]
                },
                30,
            ),
            _usage("outer done", 5),
        ]
    )
    env = sub_agent_run(
        "outer",
        provider=outer,
        members={"helper": {"provider": member, "token_budget": 10_000}},
        token_budget=100,
    )
    assert env["ok"], env
    observation = sub_agent_transcript(env["transcript"])["messages"][2]["content"]  # type: ignore[index]
    assert '"token_budget": 70' in observation  # what the parent had left, not 10_000
    assert env["tokens_used"] == 30 + 10 + 5  # the member's spend is charged to the parent


def test_a_member_over_its_reserve_is_stopped(rec: Recorder) -> None:
    member = MockProvider([_usage(tc("read"), 60), _usage("never", 1)])
    outer = MockProvider(
        [
            _usage(
                {
                    "tool_calls": [
                        {"name": "delegate", "arguments": {"member": "helper", "task": "t"}}
                    ]
                },
                30,
            ),
            _usage("outer done", 5),
        ]
    )
    env = sub_agent_run(
        "outer",
        provider=outer,
        members={
            "helper": {"provider": member, "tools": [rec.tool("read")], "loop_until_done": True}
        },
        token_budget=50,
    )
    assert len(member.requests) == 1  # its reserve (20 left) was spent by the first call
    observation = sub_agent_transcript(env["transcript"])["messages"][2]["content"]  # type: ignore[index]
    assert "budget_exhausted" in observation


def test_a_sub_agent_refused_by_an_approval_rule_says_which(rec: Recorder) -> None:
    env = sub_agent_run(
        "x",
        provider=MockProvider([tc("push"), "done"]),
        tools=[rec.tool("push")],
        approval_policy={
            "rules": [{"name": "no-push", "decision": "deny", "match": {"tools": ["push"]}}]
        },
    )
    assert rec.names() == [] and not env["ok"]
    assert env["error"]["category"] == "permission_denied"
    assert "allowed by all" not in env["error"]["message"]
    assert "no-push" in env["error"]["message"]
