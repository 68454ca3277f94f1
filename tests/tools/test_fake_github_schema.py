"""FakeGitHub answers in GitHub's shapes: every response parses into githubkit's models
(generated from GitHub's OpenAPI description), errors included."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from githubkit import AppAuthStrategy, GitHub, TokenAuthStrategy
from githubkit.exception import RequestFailed

from charter.testing import FakeApp, FakeGitHub

from .conftest import DIFF, HEAD, TOKEN

REPO = ("octo", "app")


def client(gh: FakeGitHub, auth: Any) -> GitHub[Any]:
    return GitHub(auth, base_url=gh.url, http_cache=False, auto_retry=False)


CALLS: dict[str, Callable[[GitHub[Any]], Any]] = {
    "pull": lambda g: g.rest.pulls.get(*REPO, 462),
    "files": lambda g: g.rest.pulls.list_files(*REPO, 462),
    "review": lambda g: g.rest.pulls.create_review(
        *REPO,
        462,
        body="x",
        event="COMMENT",
        comments=[{"path": "src/app/retry.py", "line": 10, "side": "RIGHT", "body": "c"}],
    ),
    "comment": lambda g: g.rest.issues.create_comment(*REPO, 462, body="x"),
    "labels": lambda g: g.rest.issues.add_labels(*REPO, 462, labels=["bug"]),
    "reviewers": lambda g: g.rest.pulls.request_reviewers(*REPO, 462, reviewers=["bob"]),
    "required": lambda g: g.rest.repos.get_status_checks_protection(*REPO, "main"),
    "check_runs": lambda g: g.rest.checks.list_for_ref(*REPO, HEAD),
    "combined": lambda g: g.rest.repos.get_combined_status_for_ref(*REPO, HEAD),
    "status": lambda g: g.rest.repos.create_commit_status(
        *REPO, HEAD, state="success", context="ci"
    ),
    "user": lambda g: g.rest.users.get_authenticated(),
    "merge": lambda g: g.rest.pulls.merge(*REPO, 462, sha=HEAD, merge_method="squash"),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_token_routes_parse_as_githubs_models(gh: FakeGitHub, name: str) -> None:
    response = CALLS[name](client(gh, TokenAuthStrategy(TOKEN)))
    assert response.parsed_data is not None
    assert response.headers["x-github-request-id"]


def test_app_routes_parse_as_githubs_models(gh: FakeGitHub) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    gh.app = FakeApp(99, pem, {"octo/app": 5})
    app = client(gh, AppAuthStrategy("99", pem))
    installation = app.rest.apps.get_repo_installation(*REPO).parsed_data
    assert installation.id == 5
    token = app.rest.apps.create_installation_access_token(5).parsed_data
    assert token.token.startswith("ghs_")
    assert app.rest.apps.get_authenticated().parsed_data is not None
    inst = client(gh, TokenAuthStrategy(token.token))
    run = inst.rest.checks.create(
        *REPO,
        name="charter",
        head_sha=HEAD,
        status="completed",
        conclusion="success",
        output={"title": "ok", "summary": "fine"},
    ).parsed_data
    assert run.conclusion == "success"


def test_errors_are_githubs_error_bodies(gh: FakeGitHub) -> None:
    from githubkit_schemas.latest.models import BasicError, ValidationError

    g = client(gh, TokenAuthStrategy(TOKEN))
    with pytest.raises(RequestFailed) as missing:
        g.rest.pulls.get(*REPO, 9)
    assert BasicError.model_validate(missing.value.response.json()).message == "Not Found"
    with pytest.raises(RequestFailed) as invalid:
        g.rest.issues.create_comment(*REPO, 462, body="")
    parsed = ValidationError.model_validate(invalid.value.response.json())
    assert parsed.message == "Validation Failed"
    assert DIFF  # the PR's diff is the fixture's
