"""A fake GitHub REST API on 127.0.0.1, speaking GitHub's wire format.

Routes, status codes, headers (``x-github-request-id``, ``x-ratelimit-*``,
``retry-after``) and error bodies (``{"message", "documentation_url", "status"}``, with
``errors`` for 422) follow GitHub's REST API description, for the operations
:mod:`charter.tools.github` uses:

- ``GET /repos/{o}/{r}/pulls/{n}``: the pull request, or its diff with
  ``Accept: application/vnd.github.diff``; ``GET .../pulls/{n}/files``: files, patches;
- ``POST .../pulls/{n}/reviews``: a review; 422 "Line could not be resolved" when a line
  comment is not in the diff;
- ``PUT .../pulls/{n}/merge``: merged, with the merge SHA; 409 "Head branch was
  modified" when ``sha`` is not the head; 405 when not mergeable;
- ``POST .../pulls/{n}/requested_reviewers``, ``.../issues/{n}/comments``, ``.../labels``;
- ``GET .../branches/{b}/protection/required_status_checks`` (404 "Branch not
  protected"), ``GET .../commits/{ref}/check-runs``, ``GET .../commits/{ref}/status``;
- ``POST .../statuses/{sha}``; ``POST .../check-runs`` (403 for a personal token: check
  runs need an App);
- ``GET .../installation`` and ``POST /app/installations/{id}/access_tokens`` (the App's
  JWT verified with its key; tokens expire after ``FakeApp.token_ttl``);
- ``GET /user`` (``x-oauth-scopes`` for a classic token), ``GET /app``.

Every request is recorded (:attr:`requests`); the state (:attr:`reviews`,
:attr:`comments`, :attr:`merges`, ...) is what a test asserts on.

```python
with FakeGitHub(tokens=["ghp_test"]) as gh:
    gh.add_pull("octo/repo", 7, head_sha="a" * 40, diff=DIFF)
    ...  # point GITHUB_API_URL at gh.url
    assert gh.reviews["octo/repo#7"][0]["comments"][0]["line"] == 3
```
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import _github_shapes as shapes
from ._server import FakeServer, RecordedRequest, Reply

DOCS = "https://docs.github.com/rest"
SECONDARY_LIMIT = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try "
    "again. If you reach out to GitHub Support for help, please include the request ID "
)


_APP_PERMISSIONS = {
    "pull_requests": "write",
    "contents": "read",
    "checks": "write",
    "statuses": "write",
    "issues": "write",
    "administration": "read",
    "metadata": "read",
}


@dataclass
class FakePull:
    repo: str
    number: int
    head_sha: str
    title: str = "A change"
    body: str = ""
    head_ref: str = "feature"
    base_ref: str = "main"
    base_sha: str = "0" * 40
    diff: str = ""
    author: str = "octocat"
    state: str = "open"
    merged: bool = False
    merge_sha: str | None = None
    mergeable: bool = True
    draft: bool = False
    labels: list[str] = field(default_factory=list)
    requested_reviewers: list[str] = field(default_factory=list)


@dataclass
class FakeApp:
    """A GitHub App: its id, its private key (PEM) and installations by repository."""

    app_id: int
    private_key: str
    installations: dict[str, int] = field(default_factory=dict)
    token_ttl: float = 3600.0


def diff_lines(diff: str) -> dict[str, dict[str, set[int]]]:
    """For each file of a unified diff, the line numbers a review comment may anchor to:
    ``RIGHT`` (added and context lines, new numbering), ``LEFT`` (removed and context)."""
    out: dict[str, dict[str, set[int]]] = {}
    current: dict[str, set[int]] | None = None
    old = new = 0
    for line in diff.splitlines():
        if line.startswith("+++ "):
            path = line[4:].strip()
            path = path[2:] if path.startswith("b/") else path
            current = out.setdefault(path, {"LEFT": set(), "RIGHT": set()})
            continue
        if line.startswith("--- ") or line.startswith("diff --git"):
            continue
        hunk = re.match(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@", line)
        if hunk:
            old, new = int(hunk.group(1)), int(hunk.group(2))
            continue
        if current is None:
            continue
        if line.startswith("+"):
            current["RIGHT"].add(new)
            new += 1
        elif line.startswith("-"):
            current["LEFT"].add(old)
            old += 1
        elif line.startswith(" ") or line == "":
            current["RIGHT"].add(new)
            current["LEFT"].add(old)
            old += 1
            new += 1
    return out


def _file_patches(diff: str) -> list[dict[str, Any]]:
    files: list[dict[str, Any]] = []
    for chunk in re.split(r"(?m)^(?=diff --git )", diff):
        if not chunk.startswith("diff --git"):
            continue
        name = re.search(r"(?m)^\+\+\+ (?:b/)?(.+)$", chunk)
        old = re.search(r"(?m)^--- (.+)$", chunk)
        filename = name.group(1).strip() if name else chunk.split()[3][2:]
        body = chunk[chunk.find("@@") :] if "@@" in chunk else ""
        adds = sum(1 for ln in body.splitlines() if ln.startswith("+"))
        dels = sum(1 for ln in body.splitlines() if ln.startswith("-"))
        status = "added" if old and old.group(1).strip() == "/dev/null" else "modified"
        if name and name.group(1).strip() == "/dev/null":
            status = "removed"
        files.append(
            {
                "filename": filename,
                "status": status,
                "additions": adds,
                "deletions": dels,
                "changes": adds + dels,
                "patch": body.rstrip("\n"),
            }
        )
    return files


class FakeGitHub(FakeServer):
    """The fake; ``tokens`` are the personal/Actions tokens it accepts
    (``scopes`` is what ``x-oauth-scopes`` reports for them); ``prefix="/api/v3"``
    mounts it as GitHub Enterprise Server does (``url`` includes it)."""

    service = "github"

    def __init__(
        self,
        *,
        tokens: Sequence[str] = ("ghp_charter_fake_token",),
        scopes: str = "repo",
        app: FakeApp | None = None,
        clock: Callable[[], float] = time.time,
        tls: bool = False,
        prefix: str = "",
    ) -> None:
        super().__init__(tls=tls, prefix=prefix)
        self.tokens = set(tokens)
        self.scopes = scopes
        self.app = app
        self.clock = clock
        self.installation_tokens: dict[str, tuple[int, float]] = {}
        self.pulls: dict[str, FakePull] = {}
        self.protection: dict[str, list[str]] = {}
        self.check_run_state: dict[str, list[dict[str, Any]]] = {}
        self.status_state: dict[str, list[dict[str, Any]]] = {}
        self.reviews: dict[str, list[dict[str, Any]]] = {}
        self.comments: dict[str, list[dict[str, Any]]] = {}
        self.merges: list[dict[str, Any]] = []
        self._ids = itertools.count(1001)
        r = r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)"
        self.route("GET", "/user", self._user)
        self.route("GET", "/app", self._app)
        self.route("GET", f"{r}/installation", self._installation)
        self.route("POST", r"/app/installations/(?P<id>\d+)/access_tokens", self._access_token)
        self.route("GET", f"{r}/pulls/(?P<n>\\d+)", self._get_pull)
        self.route("GET", f"{r}/pulls/(?P<n>\\d+)/files", self._files)
        self.route("POST", f"{r}/pulls/(?P<n>\\d+)/reviews", self._review)
        self.route("PUT", f"{r}/pulls/(?P<n>\\d+)/merge", self._merge)
        self.route("POST", f"{r}/pulls/(?P<n>\\d+)/requested_reviewers", self._reviewers)
        self.route("POST", f"{r}/issues/(?P<n>\\d+)/comments", self._comment)
        self.route("POST", f"{r}/issues/(?P<n>\\d+)/labels", self._labels)
        self.route(
            "GET",
            f"{r}/branches/(?P<b>[^/]+)/protection/required_status_checks",
            self._required,
        )
        self.route("GET", f"{r}/commits/(?P<ref>[^/]+)/check-runs", self._check_runs)
        self.route("GET", f"{r}/commits/(?P<ref>[^/]+)/status", self._combined)
        self.route("POST", f"{r}/statuses/(?P<sha>[0-9a-f]{{40}})", self._set_status)
        self.route("POST", f"{r}/check-runs", self._create_check_run)

    # -- state -------------------------------------------------------------------

    def add_pull(self, repo: str, number: int, head_sha: str, **fields: Any) -> FakePull:
        pull = FakePull(repo, number, head_sha, **fields)
        self.pulls[f"{repo}#{number}"] = pull
        return pull

    def protect(self, repo: str, branch: str, contexts: Sequence[str]) -> None:
        self.protection[f"{repo}@{branch}"] = list(contexts)

    def add_check_run(
        self, repo: str, sha: str, name: str, conclusion: str | None, status: str = "completed"
    ) -> None:
        self.check_run_state.setdefault(f"{repo}@{sha}", []).append(
            {
                "id": next(self._ids),
                "name": name,
                "head_sha": sha,
                "status": status,
                "conclusion": conclusion if status == "completed" else None,
            }
        )

    def move_head(self, repo: str, number: int, head_sha: str) -> None:
        """Someone pushed: the PR's head is now ``head_sha``."""
        self.pulls[f"{repo}#{number}"].head_sha = head_sha

    def load(self, path: str | Path) -> FakeGitHub:
        """Fill the fake from a world file (JSON): see :meth:`load_world`."""
        path = Path(path)
        return self.load_world(json.loads(path.read_text(encoding="utf-8")), path.parent)

    def load_world(self, world: Mapping[str, Any], base: Path) -> FakeGitHub:
        """``pulls`` (``repo``, ``number``, ``head_sha``, ``diff_file`` relative to ``base``,
        other :class:`FakePull` fields), ``protection`` (``repo``, ``branch``,
        ``contexts``), ``check_runs`` (``repo``, ``head_sha``, ``name``, ``conclusion``)."""
        for pr in world.get("pulls", []):
            pr = dict(pr)
            if "diff_file" in pr:
                pr["diff"] = (base / pr.pop("diff_file")).read_text(encoding="utf-8")
            self.add_pull(pr.pop("repo"), int(pr.pop("number")), pr.pop("head_sha"), **pr)
        for item in world.get("protection", []):
            self.protect(item["repo"], item["branch"], item["contexts"])
        for run in world.get("check_runs", []):
            self.add_check_run(
                run["repo"],
                run["head_sha"],
                run["name"],
                run.get("conclusion"),
                run.get("status", "completed"),
            )
        return self

    def rate_limit_next(self, method: str, path: str, *, retry_after: int = 1) -> None:
        """The next matching request gets GitHub's secondary rate limit: 403 with
        ``Retry-After``."""

        def reply() -> Reply:
            rid = _request_id()
            return Reply(
                403,
                {
                    "message": SECONDARY_LIMIT + rid + ".",
                    "documentation_url": f"{DOCS}/overview/rate-limits-for-the-rest-api"
                    "#about-secondary-rate-limits",
                    "status": "403",
                },
                {"retry-after": str(retry_after), "x-github-request-id": rid},
            )

        self.fail_next(method, path, reply)

    def server_error_next(self, method: str, path: str, *, times: int = 1) -> None:
        self.fail_next(method, path, lambda: _error(502, "Server Error", f"{DOCS}"), times=times)

    # -- auth --------------------------------------------------------------------

    def _bearer(self, req: RecordedRequest) -> str | None:
        value = req.headers.get("authorization", "")
        scheme, _, token = value.partition(" ")
        return token.strip() if scheme.lower() in ("token", "bearer") and token else None

    def _auth(self, req: RecordedRequest) -> tuple[str, Any] | Reply:
        """``("token", t)``, ``("installation", id)`` or a 401 reply."""
        token = self._bearer(req)
        if token is None:
            return _error(401, "Requires authentication", f"{DOCS}/overview/authenticating")
        if token in self.tokens:
            return ("token", token)
        held = self.installation_tokens.get(token)
        if held is not None:
            iid, expires = held
            if self.clock() < expires:
                return ("installation", iid)
        return _error(401, "Bad credentials", DOCS)

    def _app_jwt(self, req: RecordedRequest) -> int | Reply:
        import jwt
        from cryptography.hazmat.primitives import serialization

        token = self._bearer(req)
        if self.app is None or token is None:
            return _error(401, "A JSON web token could not be decoded", DOCS)
        key = serialization.load_pem_private_key(self.app.private_key.encode(), None)
        public = key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        try:
            claims = jwt.decode(
                token, public, algorithms=["RS256"], options={"require": ["iat", "exp", "iss"]}
            )
        except jwt.PyJWTError as exc:
            return _error(401, f"A JSON web token could not be decoded ({exc})", DOCS)
        if str(claims.get("iss")) != str(self.app.app_id):
            return _error(401, "Integration not found", DOCS)
        return self.app.app_id

    # -- handlers ----------------------------------------------------------------

    def _user(self, req: RecordedRequest, m: re.Match[str]) -> Reply:
        who = self._auth(req)
        if isinstance(who, Reply):
            return who
        headers = {"x-oauth-scopes": self.scopes} if who[0] == "token" else {}
        me = {
            **shapes.user("charter-bot"),
            "name": "charter bot",
            "company": None,
            "blog": "",
            "location": None,
            "email": None,
            "hireable": None,
            "bio": None,
            "public_repos": 1,
            "public_gists": 0,
            "followers": 0,
            "following": 0,
            "created_at": shapes.STAMP,
            "updated_at": shapes.STAMP,
        }
        return _ok(me, headers=headers)

    def _app(self, req: RecordedRequest, m: re.Match[str]) -> Reply:
        got = self._app_jwt(req)
        if isinstance(got, Reply):
            return got
        return _ok(
            {
                "id": got,
                "slug": "charter-review",
                "node_id": shapes.node_id("A", got),
                "owner": shapes.user("example", "Organization"),
                "name": "charter review",
                "description": "review_captain",
                "external_url": "https://example.com",
                "html_url": f"{shapes.WEB}/apps/charter-review",
                "created_at": shapes.STAMP,
                "updated_at": shapes.STAMP,
                "permissions": dict(_APP_PERMISSIONS),
                "events": ["pull_request", "pull_request_review", "check_run"],
            }
        )

    def _installation(self, req: RecordedRequest, m: re.Match[str]) -> Reply:
        got = self._app_jwt(req)
        if isinstance(got, Reply):
            return got
        assert self.app is not None
        iid = self.app.installations.get(f"{m['o']}/{m['r']}")
        if iid is None:
            return _error(
                404,
                "Not Found",
                f"{DOCS}/apps/apps#get-a-repository-installation-for-the-authenticated-app",
            )
        account = shapes.user(m["o"], "Organization")
        return _ok(
            {
                "id": iid,
                "account": account,
                "repository_selection": "selected",
                "access_tokens_url": f"{shapes.API}/app/installations/{iid}/access_tokens",
                "repositories_url": f"{shapes.API}/installation/repositories",
                "html_url": f"{shapes.WEB}/organizations/{m['o']}/settings/installations/{iid}",
                "app_id": self.app.app_id,
                "app_slug": "charter-review",
                "target_id": account["id"],
                "target_type": "Organization",
                "permissions": dict(_APP_PERMISSIONS),
                "events": ["pull_request", "pull_request_review", "check_run"],
                "created_at": shapes.STAMP,
                "updated_at": shapes.STAMP,
                "single_file_name": None,
                "suspended_by": None,
                "suspended_at": None,
            }
        )

    def _access_token(self, req: RecordedRequest, m: re.Match[str]) -> Reply:
        got = self._app_jwt(req)
        if isinstance(got, Reply):
            return got
        assert self.app is not None
        iid = int(m["id"])
        if iid not in self.app.installations.values():
            return _error(
                404, "Not Found", f"{DOCS}/apps/apps#create-an-installation-access-token-for-an-app"
            )
        token = "ghs_" + secrets.token_hex(18)
        expires = self.clock() + self.app.token_ttl
        self.installation_tokens[token] = (iid, expires)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires))
        return _ok(
            {
                "token": token,
                "expires_at": stamp,
                "permissions": {"pull_requests": "write", "checks": "write"},
                "repository_selection": "selected",
            },
            status=201,
        )

    def _pull(self, m: re.Match[str]) -> FakePull | Reply:
        pull = self.pulls.get(f"{m['o']}/{m['r']}#{m['n']}")
        if pull is None:
            return _error(404, "Not Found", f"{DOCS}/pulls/pulls#get-a-pull-request")
        return pull

    def _get_pull(self, req: RecordedRequest, m: re.Match[str]) -> Reply:
        who = self._auth(req)
        if isinstance(who, Reply):
            return who
        pull = self._pull(m)
        if isinstance(pull, Reply):
            return pull
        if "application/vnd.github.diff" in req.headers.get("accept", ""):
            return Reply(
                200,
                pull.diff,
                _headers(),
                content_type="application/vnd.github.diff; charset=utf-8",
            )
        return _ok(_pull_json(pull))

    def _files(self, req: RecordedRequest, m: re.Match[str]) -> Reply:
        who = self._auth(req)
        if isinstance(who, Reply):
            return who
        pull = self._pull(m)
        if isinstance(pull, Reply):
            return pull
        return _ok(
            [shapes.diff_entry(pull.repo, pull.head_sha, f) for f in _file_patches(pull.diff)]
        )

    def _review(self, req: RecordedRequest, m: re.Match[str]) -> Reply:
        who = self._auth(req)
        if isinstance(who, Reply):
            return who
        pull = self._pull(m)
        if isinstance(pull, Reply):
            return pull
        body = req.json() or {}
        event = body.get("event", "PENDING")
        if (
            event in ("REQUEST_CHANGES", "COMMENT")
            and not body.get("body")
            and not body.get("comments")
        ):
            return _error(
                422,
                "Unprocessable Entity",
                f"{DOCS}/pulls/reviews#create-a-review-for-a-pull-request",
                errors=[f"Review body is required for {event}"],
            )
        anchors = diff_lines(pull.diff)
        for comment in body.get("comments") or []:
            side = comment.get("side", "RIGHT")
            lines = anchors.get(str(comment.get("path")), {}).get(side, set())
            if comment.get("line") not in lines:
                return _error(
                    422,
                    "Unprocessable Entity",
                    f"{DOCS}/pulls/reviews#create-a-review-for-a-pull-request",
                    errors=["Line could not be resolved"],
                )
        rid = next(self._ids)
        html = f"{shapes.WEB}/{pull.repo}/pull/{pull.number}#pullrequestreview-{rid}"
        pr_url = f"{shapes.API}/repos/{pull.repo}/pulls/{pull.number}"
        review = {
            "id": rid,
            "node_id": shapes.node_id("PRR", rid),
            "user": shapes.user("charter-bot[bot]", "Bot"),
            "body": body.get("body", ""),
            "state": {
                "APPROVE": "APPROVED",
                "REQUEST_CHANGES": "CHANGES_REQUESTED",
                "COMMENT": "COMMENTED",
            }.get(event, "PENDING"),
            "html_url": html,
            "pull_request_url": pr_url,
            "_links": {"html": {"href": html}, "pull_request": {"href": pr_url}},
            "commit_id": body.get("commit_id") or pull.head_sha,
            "submitted_at": _now(self.clock),
            "author_association": "NONE",
            "comments": list(body.get("comments") or []),
            "event": event,
        }
        self.reviews.setdefault(f"{pull.repo}#{pull.number}", []).append(review)
        return _ok({k: v for k, v in review.items() if k not in ("comments", "event")})

    def _merge(self, req: RecordedRequest, m: re.Match[str]) -> Reply:
        who = self._auth(req)
        if isinstance(who, Reply):
            return who
        pull = self._pull(m)
        if isinstance(pull, Reply):
            return pull
        body = req.json() or {}
        doc = f"{DOCS}/pulls/pulls#merge-a-pull-request"
        if pull.merged or not pull.mergeable or pull.state != "open":
            return _error(405, "Pull Request is not mergeable", doc)
        if body.get("sha") and body["sha"] != pull.head_sha:
            return _error(409, "Head branch was modified. Review and try the merge again.", doc)
        method = body.get("merge_method", "merge")
        if method not in ("merge", "squash", "rebase"):
            return _error(
                422,
                "Validation Failed",
                doc,
                errors=[{"resource": "PullRequest", "field": "merge_method", "code": "invalid"}],
            )
        sha = hashlib.sha1(
            f"{pull.repo}#{pull.number}:{pull.head_sha}:{method}".encode()
        ).hexdigest()
        pull.merged, pull.merge_sha, pull.state = True, sha, "closed"
        self.merges.append(
            {
                "repo": pull.repo,
                "number": pull.number,
                "sha": body.get("sha"),
                "merge_method": method,
                "merge_sha": sha,
            }
        )
        return _ok({"sha": sha, "merged": True, "message": "Pull Request successfully merged"})

    def _reviewers(self, req: RecordedRequest, m: re.Match[str]) -> Reply:
        who = self._auth(req)
        if isinstance(who, Reply):
            return who
        pull = self._pull(m)
        if isinstance(pull, Reply):
            return pull
        body = req.json() or {}
        if pull.author in (body.get("reviewers") or []):
            return _error(
                422,
                "Reviews may only be requested from collaborators. One or more "
                "of the users or teams you specified is not a collaborator of the "
                f"{pull.repo} repository.",
                f"{DOCS}/pulls/review-requests",
            )
        pull.requested_reviewers.extend(body.get("reviewers") or [])
        return _ok(_pull_json(pull), status=201)

    def _issue_key(self, m: re.Match[str]) -> str | Reply:
        key = f"{m['o']}/{m['r']}#{m['n']}"
        if key not in self.pulls:
            return _error(404, "Not Found", f"{DOCS}/issues")
        return key

    def _comment(self, req: RecordedRequest, m: re.Match[str]) -> Reply:
        who = self._auth(req)
        if isinstance(who, Reply):
            return who
        key = self._issue_key(m)
        if isinstance(key, Reply):
            return key
        body = req.json() or {}
        if not body.get("body"):
            return _error(
                422,
                "Validation Failed",
                f"{DOCS}/issues/comments",
                errors=[{"resource": "IssueComment", "code": "missing_field", "field": "body"}],
            )
        cid = next(self._ids)
        repo, number = key.split("#")
        comment = {
            "id": cid,
            "node_id": shapes.node_id("IC", cid),
            "url": f"{shapes.API}/repos/{repo}/issues/comments/{cid}",
            "html_url": f"{shapes.WEB}/{repo}/pull/{number}#issuecomment-{cid}",
            "body": body["body"],
            "user": shapes.user("charter-bot[bot]", "Bot"),
            "created_at": _now(self.clock),
            "updated_at": _now(self.clock),
            "issue_url": f"{shapes.API}/repos/{repo}/issues/{number}",
            "author_association": "NONE",
        }
        self.comments.setdefault(key, []).append(comment)
        return _ok(comment, status=201)

    def _labels(self, req: RecordedRequest, m: re.Match[str]) -> Reply:
        who = self._auth(req)
        if isinstance(who, Reply):
            return who
        key = self._issue_key(m)
        if isinstance(key, Reply):
            return key
        pull = self.pulls[key]
        for name in (req.json() or {}).get("labels") or []:
            if name not in pull.labels:
                pull.labels.append(name)
        return _ok([shapes.label(pull.repo, n, i) for i, n in enumerate(pull.labels)])

    def _required(self, req: RecordedRequest, m: re.Match[str]) -> Reply:
        who = self._auth(req)
        if isinstance(who, Reply):
            return who
        contexts = self.protection.get(f"{m['o']}/{m['r']}@{m['b']}")
        if contexts is None:
            return _error(
                404,
                "Branch not protected",
                f"{DOCS}/branches/branch-protection#get-status-checks-protection",
            )
        url = f"{shapes.API}/repos/{m['o']}/{m['r']}/branches/{m['b']}/protection"
        return _ok(
            {
                "url": f"{url}/required_status_checks",
                "strict": True,
                "contexts": contexts,
                "contexts_url": f"{url}/required_status_checks/contexts",
                "checks": [{"context": c, "app_id": None} for c in contexts],
            }
        )

    def _check_runs(self, req: RecordedRequest, m: re.Match[str]) -> Reply:
        who = self._auth(req)
        if isinstance(who, Reply):
            return who
        repo = f"{m['o']}/{m['r']}"
        runs = self.check_run_state.get(f"{repo}@{m['ref']}", [])
        shaped = [shapes.check_run(repo, run) for run in runs]
        return _ok({"total_count": len(shaped), "check_runs": shaped})

    def _combined(self, req: RecordedRequest, m: re.Match[str]) -> Reply:
        who = self._auth(req)
        if isinstance(who, Reply):
            return who
        statuses = self.status_state.get(f"{m['o']}/{m['r']}@{m['ref']}", [])
        states = {s["state"] for s in statuses}
        state = (
            "failure"
            if states & {"failure", "error"}
            else "pending"
            if "pending" in states or not statuses
            else "success"
        )
        repo = f"{m['o']}/{m['r']}"
        return _ok(
            {
                "state": state,
                "sha": m["ref"],
                "total_count": len(statuses),
                "statuses": [shapes.status(repo, m["ref"], st) for st in statuses],
                "repository": shapes.repository(repo),
                "commit_url": f"{shapes.API}/repos/{repo}/commits/{m['ref']}",
                "url": f"{shapes.API}/repos/{repo}/commits/{m['ref']}/status",
            }
        )

    def _set_status(self, req: RecordedRequest, m: re.Match[str]) -> Reply:
        who = self._auth(req)
        if isinstance(who, Reply):
            return who
        body = req.json() or {}
        if body.get("state") not in ("error", "failure", "pending", "success"):
            return _error(
                422,
                "Validation Failed",
                f"{DOCS}/commits/statuses",
                errors=[{"resource": "Status", "code": "custom", "field": "state"}],
            )
        status = {
            "id": next(self._ids),
            "state": body["state"],
            "context": body.get("context", "default"),
            "description": body.get("description"),
            "target_url": body.get("target_url"),
        }
        self.status_state.setdefault(f"{m['o']}/{m['r']}@{m['sha']}", []).append(status)
        return _ok(shapes.status(f"{m['o']}/{m['r']}", m["sha"], status), status=201)

    def _create_check_run(self, req: RecordedRequest, m: re.Match[str]) -> Reply:
        who = self._auth(req)
        if isinstance(who, Reply):
            return who
        if who[0] != "installation":
            return _error(
                403,
                "Resource not accessible by personal access token",
                f"{DOCS}/checks/runs#create-a-check-run",
            )
        body = req.json() or {}
        run = {
            "id": next(self._ids),
            "name": body.get("name"),
            "head_sha": body.get("head_sha"),
            "status": body.get("status", "queued"),
            "conclusion": body.get("conclusion"),
            "output": body.get("output"),
        }
        self.check_run_state.setdefault(f"{m['o']}/{m['r']}@{body.get('head_sha')}", []).append(run)
        return _ok(shapes.check_run(f"{m['o']}/{m['r']}", run), status=201)


def _request_id() -> str:
    raw = secrets.token_hex(10).upper()
    return f"{raw[:4]}:{raw[4:9]}:{raw[9:15]}:{raw[15:20]}"


def _headers(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    reset = int(time.time()) + 3600
    return {
        "x-github-request-id": _request_id(),
        "x-github-api-version-selected": "2022-11-28",
        "x-ratelimit-limit": "5000",
        "x-ratelimit-remaining": "4999",
        "x-ratelimit-reset": str(reset),
        "x-ratelimit-used": "1",
        "x-ratelimit-resource": "core",
        **(extra or {}),
    }


def _ok(body: Any, *, status: int = 200, headers: Mapping[str, str] | None = None) -> Reply:
    return Reply(status, body, _headers(headers))


def _error(status: int, message: str, doc: str, *, errors: Any = None) -> Reply:
    body: dict[str, Any] = {"message": message, "documentation_url": doc, "status": str(status)}
    if errors is not None:
        body["errors"] = errors
    return Reply(status, body, _headers())


def _now(clock: Callable[[], float]) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock()))


def _pull_json(pull: FakePull) -> dict[str, Any]:
    api = f"{shapes.API}/repos/{pull.repo}"
    web = f"{shapes.WEB}/{pull.repo}/pull/{pull.number}"
    owner = pull.repo.split("/")[0]
    repo = shapes.repository(pull.repo)
    files = _file_patches(pull.diff)
    pid = shapes.number_id(f"{pull.repo}#{pull.number}")

    def ref(name: str, sha: str) -> dict[str, Any]:
        return {
            "label": f"{owner}:{name}",
            "ref": name,
            "sha": sha,
            "user": shapes.user(owner, "Organization"),
            "repo": repo,
        }

    return {
        "url": f"{api}/pulls/{pull.number}",
        "id": pid,
        "node_id": shapes.node_id("PR", pid),
        "html_url": web,
        "diff_url": f"{web}.diff",
        "patch_url": f"{web}.patch",
        "issue_url": f"{api}/issues/{pull.number}",
        "commits_url": f"{api}/pulls/{pull.number}/commits",
        "review_comments_url": f"{api}/pulls/{pull.number}/comments",
        "review_comment_url": f"{api}/pulls/comments{{/number}}",
        "comments_url": f"{api}/issues/{pull.number}/comments",
        "statuses_url": f"{api}/statuses/{pull.head_sha}",
        "number": pull.number,
        "state": pull.state,
        "locked": False,
        "title": pull.title,
        "user": shapes.user(pull.author),
        "body": pull.body,
        "labels": [shapes.label(pull.repo, n, i) for i, n in enumerate(pull.labels)],
        "milestone": None,
        "active_lock_reason": None,
        "created_at": shapes.STAMP,
        "updated_at": shapes.STAMP,
        "closed_at": shapes.STAMP if pull.state == "closed" else None,
        "merged_at": shapes.STAMP if pull.merged else None,
        "merge_commit_sha": pull.merge_sha,
        "assignee": None,
        "assignees": [],
        "requested_reviewers": [shapes.user(r) for r in pull.requested_reviewers],
        "requested_teams": [],
        "draft": pull.draft,
        "head": ref(pull.head_ref, pull.head_sha),
        "base": ref(pull.base_ref, pull.base_sha),
        "_links": shapes.links(pull.repo, pull.number),
        "author_association": "CONTRIBUTOR",
        "auto_merge": None,
        "merged": pull.merged,
        "mergeable": pull.mergeable if not pull.merged else None,
        "rebaseable": pull.mergeable if not pull.merged else None,
        "mergeable_state": "clean" if pull.mergeable else "dirty",
        "merged_by": shapes.user("charter-bot[bot]", "Bot") if pull.merged else None,
        "comments": 0,
        "review_comments": 0,
        "maintainer_can_modify": False,
        "commits": 1,
        "additions": sum(f["additions"] for f in files),
        "deletions": sum(f["deletions"] for f in files),
        "changed_files": len(files),
    }
