"""charter.tools.github against charter.testing.FakeGitHub: what reached GitHub."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from charter.agent import Dispatcher, ToolCallRequest
from charter.policy import Policy, make_context, with_execution_policy
from charter.testing import FakeApp, FakeGitHub
from charter.tools import GitHubClient, IntegrationSettings, RetryPolicy, github_tools

from .conftest import HEAD, TOKEN

FAST = RetryPolicy(attempts=3, wait_initial=0.01, wait_max=0.05, jitter=0.05, max_wait=5)


def tools_for(gh: FakeGitHub, env: dict[str, str] | None = None, **kw: Any) -> dict[str, Any]:
    settings = IntegrationSettings.load(env or {"GITHUB_API_URL": gh.url, "GITHUB_TOKEN": TOKEN})
    client = GitHubClient(settings.github, "octo/app", retry=FAST, **kw)
    return {t.name: t for t in github_tools(client)}


def call(tool: Any, **args: Any) -> Any:
    return asyncio.run(tool.handler(**args))


def test_review_with_line_comments_reaches_github_as_documented(gh: FakeGitHub) -> None:
    tools = tools_for(gh)
    comments = [{"path": "src/app/retry.py", "line": 10, "side": "RIGHT", "body": "cap it"}]
    got = call(
        tools["github_post_review"], number=462, body="one nit", commit_id=HEAD, comments=comments
    )
    assert got["status"] == "ok" and got["request_id"]
    (sent,) = gh.requests_to("POST", "/repos/octo/app/pulls/462/reviews")
    assert sent.json() == {
        "body": "one nit",
        "event": "COMMENT",
        "commit_id": HEAD,
        "comments": comments,
    }
    assert sent.headers["authorization"] == f"token {TOKEN}"
    assert gh.reviews["octo/app#462"][0]["comments"][0]["line"] == 10


def test_a_comment_outside_the_diff_is_githubs_422_with_its_message(gh: FakeGitHub) -> None:
    bad = [{"path": "src/app/retry.py", "line": 99, "body": "not in the diff"}]
    got = call(tools_for(gh)["github_post_review"], number=462, body="x", comments=bad)
    assert got["error"] == "unprocessable" and got["http_status"] == 422
    assert got["details"] == ["Line could not be resolved"] and got["request_id"]
    assert "octo/app#462" not in gh.reviews


def test_merge_sends_the_reviewed_head_sha_and_method(gh: FakeGitHub) -> None:
    got = call(tools_for(gh)["github_merge"], number=462, sha=HEAD)
    assert got["status"] == "ok" and got["merged"] is True and len(got["sha"]) == 40
    (sent,) = gh.requests_to("PUT", "/repos/octo/app/pulls/462/merge")
    assert sent.json() == {"sha": HEAD, "merge_method": "squash"}
    assert gh.merges[0]["merge_sha"] == got["sha"]


def test_a_moved_head_is_refused_with_409_and_nothing_merges(gh: FakeGitHub) -> None:
    gh.move_head("octo/app", 462, "b" * 40)
    got = call(tools_for(gh)["github_merge"], number=462, sha=HEAD)
    assert got["error"] == "conflict" and got["http_status"] == 409
    assert got["message"] == "Head branch was modified. Review and try the merge again."
    assert gh.merges == [] and not gh.pulls["octo/app#462"].merged


def test_merge_refuses_a_sha_that_is_not_40_hex_before_sending(gh: FakeGitHub) -> None:
    got = call(tools_for(gh)["github_merge"], number=462, sha="main")
    assert got["error"] == "invalid_arguments"
    assert gh.requests_to("PUT", ".*") == []


def test_secondary_rate_limit_is_waited_out_then_retried(gh: FakeGitHub) -> None:
    gh.rate_limit_next("POST", "/repos/octo/app/issues/462/comments", retry_after=1)
    import time

    started = time.monotonic()
    got = call(tools_for(gh)["github_comment"], number=462, body="hello")
    assert got["status"] == "ok"
    assert time.monotonic() - started >= 1.0  # Retry-After honoured
    sent = gh.requests_to("POST", "/repos/octo/app/issues/462/comments")
    assert len(sent) == 2 and gh.comments["octo/app#462"][0]["body"] == "hello"


def test_a_rate_limit_longer_than_allowed_is_a_typed_error(gh: FakeGitHub) -> None:
    gh.rate_limit_next("GET", "/repos/octo/app/pulls/462", retry_after=3600)
    got = call(tools_for(gh)["github_get_pull_request"], number=462)
    assert got["error"] == "rate_limited" and got["retry_after"] == 3600
    assert "secondary rate limit" in got["message"]


def test_5xx_is_retried(gh: FakeGitHub) -> None:
    gh.server_error_next("GET", "/repos/octo/app/pulls/462", times=2)
    got = call(tools_for(gh)["github_get_pull_request"], number=462)
    assert got["status"] == "ok" and got["head"]["sha"] == HEAD
    assert len(gh.requests_to("GET", "/repos/octo/app/pulls/462")) == 3


def test_404_and_bad_credentials_are_typed_errors(gh: FakeGitHub) -> None:
    got = call(tools_for(gh)["github_get_diff"], number=9)
    assert got["error"] == "not_found" and got["message"] == "Not Found"
    env = {"GITHUB_API_URL": gh.url, "GITHUB_TOKEN": "ghp_wrong"}
    got = call(tools_for(gh, env)["github_get_diff"], number=462)
    assert got["error"] == "unauthorized" and got["message"] == "Bad credentials"


def test_required_checks_read_protection_and_the_heads_runs(gh: FakeGitHub) -> None:
    got = call(tools_for(gh)["github_get_required_checks"], number=462)
    assert got["passing"] is True and got["required"] == [{"name": "tests", "state": "success"}]
    gh.protect("octo/app", "main", ["tests", "lint"])
    got = call(tools_for(gh)["github_get_required_checks"], number=462)
    assert got["passing"] is False and {"name": "lint", "state": "missing"} in got["required"]


def test_check_runs_need_an_app_githubs_403_message_reaches_the_model(gh: FakeGitHub) -> None:
    got = call(
        tools_for(gh)["github_create_check_run"],
        name="charter",
        head_sha=HEAD,
        conclusion="success",
        title="t",
        summary="s",
    )
    assert got["error"] == "forbidden"
    assert got["message"] == "Resource not accessible by personal access token"


def test_github_api_url_is_honoured_and_a_missing_token_never_sends(gh: FakeGitHub) -> None:
    got = call(tools_for(gh, {"GITHUB_API_URL": gh.url})["github_get_diff"], number=462)
    assert got["error"] == "credentials_missing" and "GITHUB_TOKEN" in got["message"]
    assert gh.requests == []


def _pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def test_app_installation_token_is_minted_then_refreshed_before_expiry(
    gh: FakeGitHub, tmp_path: Any
) -> None:
    now = [1_800_000_000.0]
    gh.clock = lambda: now[0]
    key = _pem()
    gh.app = FakeApp(4242, key, {"octo/app": 77}, token_ttl=3600)
    (tmp_path / "app.pem").write_text(key)
    env = {
        "GITHUB_API_URL": gh.url,
        "GITHUB_APP_ID": "4242",
        "GITHUB_APP_PRIVATE_KEY_PATH": str(tmp_path / "app.pem"),
    }
    tools = tools_for(gh, env, clock=lambda: now[0], refresh_margin=300)
    assert call(tools["github_get_pull_request"], number=462)["status"] == "ok"
    now[0] += 3000  # 10 minutes before expiry: still good
    assert call(tools["github_get_diff"], number=462)["status"] == "ok"
    now[0] += 400  # within the refresh margin: a new token, before the old one expires
    assert call(tools["github_get_pull_request"], number=462)["status"] == "ok"
    minted = gh.requests_to("POST", "/app/installations/77/access_tokens")
    assert len(minted) == 2
    assert len(gh.requests_to("GET", "/repos/octo/app/installation")) == 1
    pulls = [r for r in gh.requests if r.path.startswith("/repos/octo/app/pulls")]
    used = [r.headers["authorization"] for r in pulls]
    assert used[0] == used[1] != used[2]
    assert all(u.startswith("token ghs_") for u in used)
    # check runs work with the App's installation token
    got = call(
        tools["github_create_check_run"],
        name="charter",
        head_sha=HEAD,
        conclusion="success",
        title="ok",
        summary="fine",
    )
    assert got["status"] == "ok"


def test_credentials_never_reach_results_even_when_echoed(gh: FakeGitHub) -> None:
    from charter.testing import Reply

    # a hostile or buggy server echoes the Authorization header into its error message
    gh.fail_next(
        "GET",
        "/repos/octo/app/pulls/462",
        lambda: Reply(400, {"message": f"bad header: token {TOKEN}", "documentation_url": "x"}),
    )
    got = call(tools_for(gh)["github_get_pull_request"], number=462)
    assert got["error"] == "remote_error" and TOKEN not in repr(got)
    assert "[redacted]" in got["message"]
    assert TOKEN not in repr(IntegrationSettings.load({"GITHUB_TOKEN": TOKEN}))


def test_one_tool_per_operation_lets_a_policy_allow_reads_and_deny_merge(gh: FakeGitHub) -> None:
    tools = list(tools_for(gh).values())
    policy = Policy.from_dict(
        {
            "tools": ["github_get_*"],
            "capabilities": ["git.get_diff", "github.pr_read", "github.checks_read"],
        }
    )
    dispatcher = Dispatcher(tools, context=make_context("/tmp"))

    async def run(name: str, args: dict[str, Any]) -> Any:
        with with_execution_policy(policy, label="persona:t", kind="persona"):
            return await dispatcher.dispatch_one(ToolCallRequest("c1", name, args))

    allowed = asyncio.run(run("github_get_diff", {"number": 462}))
    assert allowed.status == "ok" and "min(30.0" in allowed.observation["diff"]
    denied = asyncio.run(run("github_merge", {"number": 462, "sha": HEAD}))
    assert denied.status == "permission_denied"
    assert gh.requests_to("PUT", ".*") == [] and gh.merges == []
    # capabilities gate too: the diff read needs git.get_diff
    only_pr = Policy.from_dict({"capabilities": ["github.pr_read"]})

    async def run2() -> Any:
        with with_execution_policy(only_pr, label="persona:t", kind="persona"):
            return await dispatcher.dispatch_one(
                ToolCallRequest("c2", "github_get_diff", {"number": 462})
            )

    assert asyncio.run(run2()).status == "permission_denied"


@pytest.mark.parametrize("name", ["github_merge", "github_post_review", "github_comment"])
def test_writes_are_network_reads_are_read_only(gh: FakeGitHub, name: str) -> None:
    tools = tools_for(gh)
    assert tools[name].annotations.side_effect_level.label == "network"
    assert tools[name].preview is not None
    assert tools["github_get_diff"].annotations.side_effect_level.label == "read_only"


def test_the_toolset_is_bound_to_its_repository(gh: FakeGitHub) -> None:
    gh.add_pull("evil/other", 462, HEAD)
    tools = tools_for(gh)
    # a path smuggled in the number, or a repository the model adds, reaches nothing else
    got = call(tools["github_comment"], number="462/../../../evil/other/issues/462", body="x")
    assert got["error"] == "invalid_arguments"
    got = call(tools["github_comment"], number=462, body="hi", repository="evil/other")
    assert got["error"] == "invalid_arguments" and "repository" in got["message"]
    got = call(tools["github_get_diff"], number=462, repository="evil/other")
    assert got["error"] == "invalid_arguments"
    assert gh.requests == [] and gh.comments == {}
    # the allowed twin
    assert call(tools["github_comment"], number=462, body="hi")["status"] == "ok"
    assert [r.path for r in gh.requests] == ["/repos/octo/app/issues/462/comments"]


def test_github_enterprise_server_base_url_with_a_path(tmp_path: Any) -> None:
    ghes = FakeGitHub(tokens=[TOKEN], prefix="/api/v3")
    ghes.add_pull("octo/app", 462, HEAD, diff="")
    with ghes:
        assert ghes.url.endswith("/api/v3")
        tools = tools_for(ghes, {"GITHUB_API_URL": ghes.url, "GITHUB_TOKEN": TOKEN})
        assert call(tools["github_merge"], number=462, sha=HEAD)["status"] == "ok"
        assert [r.path for r in ghes.requests] == ["/repos/octo/app/pulls/462/merge"]
        assert tools["github_merge"].preview({"number": 462, "sha": HEAD})["url"] == (
            f"{ghes.url}/repos/octo/app/pulls/462/merge"
        )
