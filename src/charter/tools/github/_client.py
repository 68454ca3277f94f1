"""A GitHub REST client for one repository, on githubkit (typed, async, maintained).

Every operation goes through :meth:`GitHubClient._call`: authentication (token or App
installation token), retries (:mod:`charter.tools._retry`: ``Retry-After``,
``x-ratelimit-reset``, secondary rate limits and 5xx, with backoff and jitter), typed
errors with GitHub's own message (:mod:`charter.tools.errors`), and the request id
(``x-github-request-id``) of the answer. Writes are described first as a
:class:`Request` (method, path, body): the exact request a dry run records and the one
that is then sent.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from .._redact import Redactor
from .._retry import Retryable, RetryPolicy, call_with_retries
from ..errors import (
    ConnectionFailed,
    IntegrationError,
    RateLimited,
    RemoteError,
    remote_error_class,
)
from ..settings import GitHubSettings
from ._auth import AppInstallationTokens, Clock

if TYPE_CHECKING:
    import httpx
    from githubkit import GitHub
    from githubkit.response import Response

SERVICE = "github"
REQUEST_ID = "x-github-request-id"
MERGE_METHODS = ("merge", "squash", "rebase")
REVIEW_EVENTS = ("COMMENT", "APPROVE", "REQUEST_CHANGES")
#: Conclusions of a completed check run that satisfy a required check.
PASSING = frozenset({"success", "neutral", "skipped"})


@dataclass(frozen=True)
class Request:
    """A write as it goes over the wire (the API base URL aside): what dry runs record."""

    method: str
    path: str
    body: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "path": self.path, "body": dict(self.body)}


@dataclass(frozen=True)
class Answer:
    data: Any
    request_id: str | None
    status: int


def split_repository(repository: str) -> tuple[str, str]:
    owner, sep, repo = repository.strip().partition("/")
    if not sep or not owner or not repo or "/" in repo:
        raise ValueError(f"repository {repository!r}: expected 'owner/name'")
    return owner, repo


class GitHubClient:
    """GitHub for one repository (``owner/name``)."""

    def __init__(
        self,
        settings: GitHubSettings,
        repository: str,
        *,
        installation_id: int | None = None,
        clock: Clock = time.time,
        retry: RetryPolicy | None = None,
        redactor: Redactor | None = None,
        refresh_margin: float = 300.0,
        async_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.settings = settings
        self.repository = repository
        self.owner, self.repo = split_repository(repository)
        self.installation_id = installation_id
        self.retry = retry or RetryPolicy()
        self.redactor = redactor or Redactor(settings.secrets())
        self._transport = async_transport
        self._ssl: ssl.SSLContext | None = None
        self.app_tokens: AppInstallationTokens | None = None
        if settings.auth_mode == "app":
            self.app_tokens = AppInstallationTokens(
                settings,
                client_factory=self._client,
                clock=clock,
                refresh_margin=refresh_margin,
                on_token=self.redactor.add,
            )

    # -- plumbing ------------------------------------------------------------

    def _verify(self) -> ssl.SSLContext:
        # one TLS context per client: httpx builds a new one (loading the CA bundle, ~100 ms)
        # for every client githubkit makes per request otherwise (benchmarks/integrations.py)
        if self._ssl is None:
            import httpx

            ca = self.settings.ca_bundle
            self._ssl = ssl.create_default_context(cafile=ca) if ca else httpx.create_ssl_context()
        return self._ssl

    def _client(self, auth: Any) -> GitHub[Any]:
        from githubkit import GitHub

        return GitHub(
            auth,
            base_url=self.settings.api_url,
            ssl_verify=self._verify(),
            http_cache=False,
            auto_retry=False,  # retried here, with stamina's backoff and jitter
            async_transport=self._transport,
            user_agent="charter (githubkit)",
        )

    async def _authed(self) -> GitHub[Any]:
        from githubkit import TokenAuthStrategy

        self.settings.require()
        if self.app_tokens is not None:
            token = await self.app_tokens.token(self.owner, self.repo, self.installation_id)
        else:
            assert self.settings.token is not None
            token = self.settings.token
        return self._client(TokenAuthStrategy(token))

    async def _call(
        self,
        send: Callable[[GitHub[Any]], Awaitable[Response[Any, Any]]],
        *,
        idempotent: bool,
        text: bool = False,
    ) -> Answer:
        async def attempt() -> Answer:
            try:
                gh = await self._authed()
                resp = await send(gh)
            except Exception as exc:
                raise _classify(exc, idempotent) from None
            raw = resp.raw_response
            data: Any = raw.text if text else (raw.json() if raw.content else None)
            return Answer(data, raw.headers.get(REQUEST_ID), raw.status_code)

        return await call_with_retries(self.retry, attempt)

    def path(self, tail: str) -> str:
        return f"/repos/{self.owner}/{self.repo}{tail}"

    # -- who am I (charter doctor) ---------------------------------------------

    async def whoami(self) -> tuple[str, str | None]:
        """The token's login and, for a classic token, its ``x-oauth-scopes``."""
        got: dict[str, Any] = {}

        async def send(gh: GitHub[Any]) -> Response[Any, Any]:
            resp = await gh.rest.users.async_get_authenticated()
            got["scopes"] = resp.raw_response.headers.get("x-oauth-scopes")
            return resp

        answer = await self._call(send, idempotent=True)
        return str((answer.data or {}).get("login")), got.get("scopes")

    async def app_slug(self) -> str:
        """The App's slug (``GET /app`` with the App's JWT)."""
        assert self.app_tokens is not None, "not a GitHub App"
        app = self.app_tokens.app_client()

        async def attempt() -> str:
            try:
                resp = await app.rest.apps.async_get_authenticated()
            except Exception as exc:
                raise _classify(exc, True) from None
            return str(resp.raw_response.json().get("slug"))

        return await call_with_retries(self.retry, attempt)

    async def installation(self) -> int:
        """The App's installation on this repository."""
        assert self.app_tokens is not None, "not a GitHub App"
        tokens = self.app_tokens

        async def attempt() -> int:
            try:
                return await tokens.installation_id(self.owner, self.repo)
            except Exception as exc:
                raise _classify(exc, True) from None

        return await call_with_retries(self.retry, attempt)

    # -- reads ---------------------------------------------------------------

    async def get_pull_request(self, number: int) -> Answer:
        return await self._call(
            lambda gh: gh.rest.pulls.async_get(self.owner, self.repo, number), idempotent=True
        )

    async def list_files(self, number: int) -> Answer:
        return await self._call(
            lambda gh: gh.rest.pulls.async_list_files(self.owner, self.repo, number, per_page=100),
            idempotent=True,
        )

    async def get_diff(self, number: int) -> Answer:
        return await self._call(
            lambda gh: gh.rest.pulls.async_get(
                self.owner,
                self.repo,
                number,
                headers={"Accept": "application/vnd.github.diff"},
            ),
            idempotent=True,
            text=True,
        )

    async def required_checks(self, branch: str) -> tuple[list[str], str | None]:
        """The contexts branch protection requires on ``branch`` ([] when unprotected)."""
        try:
            got = await self._call(
                lambda gh: gh.rest.repos.async_get_status_checks_protection(
                    self.owner, self.repo, branch
                ),
                idempotent=True,
            )
        except RemoteError as exc:
            if exc.http_status == 404 and "not protected" in exc.message.lower():
                return [], exc.request_id
            raise
        data = got.data or {}
        names = [str(c) for c in data.get("contexts") or []]
        for check in data.get("checks") or []:
            if check.get("context") not in names:
                names.append(str(check.get("context")))
        return names, got.request_id

    async def check_runs(self, ref: str) -> Answer:
        return await self._call(
            lambda gh: gh.rest.checks.async_list_for_ref(self.owner, self.repo, ref, per_page=100),
            idempotent=True,
        )

    async def combined_status(self, ref: str) -> Answer:
        return await self._call(
            lambda gh: gh.rest.repos.async_get_combined_status_for_ref(self.owner, self.repo, ref),
            idempotent=True,
        )

    # -- writes: a Request each, then sent as described ------------------------

    def review_request(
        self,
        number: int,
        body: str,
        event: str = "COMMENT",
        comments: Sequence[Mapping[str, Any]] = (),
        commit_id: str | None = None,
    ) -> Request:
        if event not in REVIEW_EVENTS:
            raise ValueError(f"event {event!r}: expected one of {', '.join(REVIEW_EVENTS)}")
        payload: dict[str, Any] = {"body": body, "event": event}
        if commit_id:
            payload["commit_id"] = commit_id
        if comments:
            payload["comments"] = [_review_comment(c, i) for i, c in enumerate(comments)]
        return Request("POST", self.path(f"/pulls/{number}/reviews"), payload)

    def comment_request(self, number: int, body: str) -> Request:
        return Request("POST", self.path(f"/issues/{number}/comments"), {"body": body})

    def labels_request(self, number: int, labels: Sequence[str]) -> Request:
        return Request("POST", self.path(f"/issues/{number}/labels"), {"labels": list(labels)})

    def reviewers_request(
        self, number: int, reviewers: Sequence[str] = (), team_reviewers: Sequence[str] = ()
    ) -> Request:
        payload: dict[str, Any] = {"reviewers": list(reviewers)}
        if team_reviewers:
            payload["team_reviewers"] = list(team_reviewers)
        return Request("POST", self.path(f"/pulls/{number}/requested_reviewers"), payload)

    def status_request(
        self, sha: str, state: str, context: str, description: str = "", target_url: str = ""
    ) -> Request:
        if state not in ("error", "failure", "pending", "success"):
            raise ValueError(f"state {state!r}: expected error, failure, pending or success")
        payload: dict[str, Any] = {"state": state, "context": context}
        if description:
            payload["description"] = description
        if target_url:
            payload["target_url"] = target_url
        return Request("POST", self.path(f"/statuses/{sha}"), payload)

    def check_run_request(
        self, name: str, head_sha: str, conclusion: str, title: str, summary: str
    ) -> Request:
        payload = {
            "name": name,
            "head_sha": head_sha,
            "status": "completed",
            "conclusion": conclusion,
            "output": {"title": title, "summary": summary},
        }
        return Request("POST", self.path("/check-runs"), payload)

    def merge_request(
        self, number: int, sha: str, method: str, title: str = "", message: str = ""
    ) -> Request:
        if method not in MERGE_METHODS:
            raise ValueError(f"merge method {method!r}: expected one of {', '.join(MERGE_METHODS)}")
        if len(sha) != 40 or any(ch not in "0123456789abcdef" for ch in sha.lower()):
            raise ValueError(f"sha {sha!r}: expected the 40-hex head SHA that was reviewed")
        payload: dict[str, Any] = {"sha": sha, "merge_method": method}
        if title:
            payload["commit_title"] = title
        if message:
            payload["commit_message"] = message
        return Request("PUT", self.path(f"/pulls/{number}/merge"), payload)

    async def send(self, request: Request) -> Answer:
        """Send a write built by one of the ``*_request`` methods, through githubkit's
        typed endpoint for it (its body validated against GitHub's schema)."""
        # the body was built above from GitHub's documented fields; githubkit validates it
        # against the endpoint's schema (rest_api_validate_body) before it is sent
        o, r, body = self.owner, self.repo, cast(Any, dict(request.body))
        parts = request.path.split("/")[4:]  # after /repos/{o}/{r}/
        send: Callable[[GitHub[Any]], Awaitable[Response[Any, Any]]]
        match parts:
            case ["pulls", n, "reviews"]:
                send = lambda gh: gh.rest.pulls.async_create_review(o, r, int(n), data=body)  # noqa: E731
            case ["issues", n, "comments"]:
                send = lambda gh: gh.rest.issues.async_create_comment(o, r, int(n), data=body)  # noqa: E731
            case ["issues", n, "labels"]:
                send = lambda gh: gh.rest.issues.async_add_labels(o, r, int(n), data=body)  # noqa: E731
            case ["pulls", n, "requested_reviewers"]:
                send = lambda gh: gh.rest.pulls.async_request_reviewers(o, r, int(n), data=body)  # noqa: E731
            case ["statuses", sha]:
                send = lambda gh: gh.rest.repos.async_create_commit_status(o, r, sha, data=body)  # noqa: E731
            case ["check-runs"]:
                send = lambda gh: gh.rest.checks.async_create(o, r, data=body)  # noqa: E731
            case ["pulls", n, "merge"]:
                send = lambda gh: gh.rest.pulls.async_merge(o, r, int(n), data=body)  # noqa: E731
            case _:
                raise ValueError(f"no GitHub operation for {request.method} {request.path}")
        return await self._call(send, idempotent=request.method == "PUT")


def _review_comment(comment: Mapping[str, Any], index: int) -> dict[str, Any]:
    """A line comment anchored to the diff: ``path``, ``line``, ``side`` (and a range's
    ``start_line`` / ``start_side``), ``body``."""
    where = f"comments[{index}]"
    for key in ("path", "body"):
        if not isinstance(comment.get(key), str) or not comment.get(key):
            raise ValueError(f"{where}.{key}: expected a non-empty string")
    line = comment.get("line")
    if not isinstance(line, int) or isinstance(line, bool) or line < 1:
        raise ValueError(f"{where}.line: expected a line number of the diff (>= 1)")
    side = comment.get("side", "RIGHT")
    if side not in ("LEFT", "RIGHT"):
        raise ValueError(f"{where}.side: expected LEFT or RIGHT")
    out: dict[str, Any] = {
        "path": comment["path"],
        "line": line,
        "side": side,
        "body": comment["body"],
    }
    if comment.get("start_line") is not None:
        out["start_line"] = int(comment["start_line"])
        out["start_side"] = comment.get("start_side", side)
    return out


def _classify(exc: Exception, idempotent: bool) -> Exception:
    """githubkit's exception -> a typed error, wrapped in :class:`Retryable` when worth
    another attempt."""
    from githubkit.exception import (
        RateLimitExceeded,
        RequestError,
        RequestFailed,
        RequestTimeout,
    )

    if isinstance(exc, IntegrationError):
        return exc
    if isinstance(exc, RequestFailed):
        resp = exc.response.raw_response
        error = _remote_error(resp)
        if isinstance(exc, RateLimitExceeded):
            wait = exc.retry_after.total_seconds()
            limited = RateLimited(
                SERVICE,
                error.message,
                http_status=resp.status_code,
                request_id=error.request_id,
                documentation_url=error.documentation_url,
                retry_after=wait,
            )
            return Retryable(limited, wait)
        if resp.status_code >= 500:
            return Retryable(error)
        return error
    if isinstance(exc, RequestTimeout | RequestError):
        inner = getattr(exc, "exc", exc)
        failed = ConnectionFailed(SERVICE, f"{type(inner).__name__}: {inner}")
        return Retryable(failed) if idempotent or not isinstance(exc, RequestTimeout) else failed
    return exc


def _remote_error(resp: httpx.Response) -> RemoteError:
    """GitHub's error body (``message``, ``documentation_url``, ``errors``) as a typed error."""
    try:
        body = resp.json()
    except ValueError:
        body = None
    message = resp.reason_phrase or f"HTTP {resp.status_code}"
    doc: str | None = None
    details: Any = None
    if isinstance(body, dict):
        message = str(body.get("message") or message)
        doc = body.get("documentation_url")
        details = body.get("errors")
    cls = remote_error_class(resp.status_code)
    return cls(
        SERVICE,
        message,
        http_status=resp.status_code,
        request_id=resp.headers.get(REQUEST_ID),
        documentation_url=doc,
        details=details,
    )
