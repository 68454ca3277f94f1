"""Where the integrations find their settings: the environment over charter.toml."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

import charter.testing
import charter.tools
from charter.testing import FakeGitHub, Reply
from charter.tools import (
    CredentialsMissing,
    GitHubClient,
    IntegrationSettings,
    RetryPolicy,
    github_tools,
)

from .conftest import TOKEN


def test_environment_wins_over_charter_toml_and_secrets_come_only_from_env(
    tmp_path: Path,
) -> None:
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "app.pem").write_text("PEM")
    (tmp_path / "charter.toml").write_text(
        '[integrations.github]\napi_url = "https://ghe.example.com/api/v3"\napp_id = "7"\n'
        'private_key_path = "keys/app.pem"\nmerge_method = "rebase"\ntoken = "ignored"\n'
        '[integrations.pagerduty]\nfrom_email = "bot@example.com"\n'
    )
    s = IntegrationSettings.for_pack(tmp_path, env={})
    assert s.github.api_url == "https://ghe.example.com/api/v3" and s.github.app_id == "7"
    assert s.github.private_key == "PEM" and s.github.auth_mode == "app"
    assert s.github.merge_method == "rebase" and s.github.token is None
    assert s.pagerduty.from_email == "bot@example.com"
    s = IntegrationSettings.for_pack(tmp_path, env={"GITHUB_API_URL": "http://127.0.0.1:1"})
    assert s.github.api_url == "http://127.0.0.1:1"


def test_an_unreadable_key_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(CredentialsMissing) as err:
        IntegrationSettings.load(
            {"GITHUB_APP_ID": "1", "GITHUB_APP_PRIVATE_KEY_PATH": str(tmp_path / "nope.pem")}
        )
    assert "nope.pem" in str(err.value)


def test_primary_rate_limit_waits_for_x_ratelimit_reset(gh: FakeGitHub) -> None:
    reset = int(time.time()) + 2
    gh.fail_next(
        "GET",
        "/repos/octo/app/pulls/462",
        lambda: Reply(
            403,
            {
                "message": "API rate limit exceeded for installation ID 1.",
                "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
                "status": "403",
            },
            {
                "x-ratelimit-remaining": "0",
                "x-ratelimit-reset": str(reset),
                "x-github-request-id": "AAAA:BBBBB:CCCCCC:DDDDD",
            },
        ),
    )
    settings = IntegrationSettings.load({"GITHUB_API_URL": gh.url, "GITHUB_TOKEN": TOKEN})
    client = GitHubClient(settings.github, "octo/app", retry=RetryPolicy(jitter=0.1))
    tool = next(t for t in github_tools(client) if t.name == "github_get_pull_request")
    started = time.monotonic()
    assert asyncio.run(tool.handler(number=462))["status"] == "ok"
    assert time.monotonic() - started >= 0.9  # waited for the reset, not retried at once
    assert len(gh.requests_to("GET", "/repos/octo/app/pulls/462")) == 2


@pytest.mark.parametrize("module", [charter.tools, charter.testing])
def test_public_surface_is_declared(module: object) -> None:
    names = module.__all__
    assert len(set(names)) == len(names)
    for name in names:
        assert getattr(module, name) is not None


def test_importing_charter_tools_does_not_import_the_sdks() -> None:
    import subprocess
    import sys

    code = (
        "import sys, charter.tools, charter.testing; "
        "print([m for m in ('githubkit', 'slack_sdk', 'pagerduty') if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
