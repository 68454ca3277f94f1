"""GitHub operations as agent tools: one tool per operation, each with its own annotations.

Reads are ``read_only``; writes are ``network``, so the persona's policy (its tools,
capabilities and side-effect ceiling) and the autonomy tier decide each one on its own:
a policy can allow ``github_get_diff`` and deny ``github_merge``. Each tool names the seed
capability it exercises (``git.get_diff``, ``github.pr_merge``, ...), so a persona's
``capabilities`` list gates it too. Writes carry a ``preview``: the exact request
(method, path, body) a dry run or an approval records instead of sending it.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from charter.agent import Tool
from charter.policy import SideEffectLevel, ToolAnnotations

from ..errors import IntegrationError
from ._client import PASSING, GitHubClient, Request

DIFF_LIMIT = 60_000
PATCH_LIMIT = 4_000


@dataclass(frozen=True)
class Operation:
    name: str
    capability: str
    level: str
    description: str
    parameters: Mapping[str, Any]


def _params(props: Mapping[str, Any], required: Sequence[str]) -> dict[str, Any]:
    return {"type": "object", "properties": dict(props), "required": list(required)}


_NUMBER = {"type": "integer", "description": "the pull request (or issue) number"}
_SHA = {"type": "string", "description": "a full 40-hex commit SHA"}

OPERATIONS: dict[str, Operation] = {
    op.name: op
    for op in (
        Operation(
            "github_get_pull_request",
            "github.pr_read",
            "read_only",
            "Read a pull request: title, body, author, head and base (with SHAs), "
            "draft and mergeable state, labels.",
            _params({"number": _NUMBER}, ["number"]),
        ),
        Operation(
            "github_list_files",
            "github.pr_read",
            "read_only",
            "List a pull request's changed files with their patches.",
            _params({"number": _NUMBER}, ["number"]),
        ),
        Operation(
            "github_get_diff",
            "git.get_diff",
            "read_only",
            "Read a pull request's unified diff.",
            _params({"number": _NUMBER}, ["number"]),
        ),
        Operation(
            "github_get_required_checks",
            "github.checks_read",
            "read_only",
            "The checks branch protection requires on the PR's base branch and how each "
            "one stands on the PR's head commit; passing is true only when all passed.",
            _params({"number": _NUMBER}, ["number"]),
        ),
        Operation(
            "github_post_review",
            "github.pr_review",
            "network",
            "Post one review on a pull request: a summary and line comments anchored "
            "to the diff (path, line, side RIGHT for the new code or LEFT for the old).",
            _params(
                {
                    "number": _NUMBER,
                    "body": {"type": "string", "description": "the review's summary"},
                    "event": {"enum": ["COMMENT", "APPROVE", "REQUEST_CHANGES"]},
                    "commit_id": {**_SHA, "description": "the head SHA that was reviewed"},
                    "comments": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "path": {"type": "string"},
                                "line": {"type": "integer"},
                                "side": {"enum": ["LEFT", "RIGHT"]},
                                "body": {"type": "string"},
                                "start_line": {"type": "integer"},
                            },
                            "required": ["path", "line", "body"],
                        },
                    },
                },
                ["number", "body"],
            ),
        ),
        Operation(
            "github_comment",
            "github.pr_comment",
            "network",
            "Comment on an issue or pull request.",
            _params({"number": _NUMBER, "body": {"type": "string"}}, ["number", "body"]),
        ),
        Operation(
            "github_add_labels",
            "github.issue_write",
            "network",
            "Add labels to an issue or pull request.",
            _params(
                {"number": _NUMBER, "labels": {"type": "array", "items": {"type": "string"}}},
                ["number", "labels"],
            ),
        ),
        Operation(
            "github_request_reviewers",
            "github.pr_review",
            "network",
            "Request reviews on a pull request from users or teams.",
            _params(
                {
                    "number": _NUMBER,
                    "reviewers": {"type": "array", "items": {"type": "string"}},
                    "team_reviewers": {"type": "array", "items": {"type": "string"}},
                },
                ["number"],
            ),
        ),
        Operation(
            "github_set_status",
            "github.checks_write",
            "network",
            "Set a commit status (state error, failure, pending or success).",
            _params(
                {
                    "sha": _SHA,
                    "state": {"enum": ["error", "failure", "pending", "success"]},
                    "context": {"type": "string"},
                    "description": {"type": "string"},
                    "target_url": {"type": "string"},
                },
                ["sha", "state", "context"],
            ),
        ),
        Operation(
            "github_create_check_run",
            "github.checks_write",
            "network",
            "Create a completed check run on a commit (needs a GitHub App).",
            _params(
                {
                    "name": {"type": "string"},
                    "head_sha": _SHA,
                    "conclusion": {
                        "enum": [
                            "success",
                            "failure",
                            "neutral",
                            "cancelled",
                            "skipped",
                            "action_required",
                        ]
                    },
                    "title": {"type": "string"},
                    "summary": {"type": "string"},
                },
                ["name", "head_sha", "conclusion", "title", "summary"],
            ),
        ),
        Operation(
            "github_merge",
            "github.pr_merge",
            "network",
            "Merge a pull request, only if its head is still `sha` (the reviewed "
            "commit); a moved head is refused with a conflict.",
            _params(
                {
                    "number": _NUMBER,
                    "sha": {
                        **_SHA,
                        "description": "the head SHA that was reviewed and whose checks passed",
                    },
                    "commit_title": {"type": "string"},
                },
                ["number", "sha"],
            ),
        ),
    )
}

#: Tool name -> the seed capability it exercises.
CAPABILITIES: dict[str, str] = {name: op.capability for name, op in OPERATIONS.items()}


def _pr_summary(pr: Mapping[str, Any]) -> dict[str, Any]:
    def ref(side: str) -> dict[str, Any]:
        data = pr.get(side) or {}
        return {"ref": data.get("ref"), "sha": data.get("sha")}

    return {
        "number": pr.get("number"),
        "title": pr.get("title"),
        "body": pr.get("body"),
        "state": pr.get("state"),
        "draft": pr.get("draft"),
        "merged": pr.get("merged"),
        "mergeable": pr.get("mergeable"),
        "mergeable_state": pr.get("mergeable_state"),
        "author": (pr.get("user") or {}).get("login"),
        "head": ref("head"),
        "base": ref("base"),
        "labels": [lb.get("name") for lb in pr.get("labels") or []],
        "html_url": pr.get("html_url"),
    }


class GitHubTools:
    """The handlers behind the tools, bound to one :class:`GitHubClient`."""

    def __init__(self, client: GitHubClient, *, merge_method: str = "squash") -> None:
        self.client = client
        self.merge_method = merge_method

    async def github_get_pull_request(self, number: int) -> dict[str, Any]:
        got = await self.client.get_pull_request(int(number))
        return {"status": "ok", "request_id": got.request_id, **_pr_summary(got.data)}

    async def github_list_files(self, number: int) -> dict[str, Any]:
        got = await self.client.list_files(int(number))
        files = [
            {
                "filename": f.get("filename"),
                "status": f.get("status"),
                "additions": f.get("additions"),
                "deletions": f.get("deletions"),
                "patch": (f.get("patch") or "")[:PATCH_LIMIT],
            }
            for f in got.data or []
        ]
        return {"status": "ok", "request_id": got.request_id, "files": files}

    async def github_get_diff(self, number: int) -> dict[str, Any]:
        got = await self.client.get_diff(int(number))
        diff = str(got.data or "")
        out: dict[str, Any] = {"status": "ok", "request_id": got.request_id}
        out["truncated"] = len(diff) > DIFF_LIMIT
        out["diff"] = diff[:DIFF_LIMIT]
        return out

    async def github_get_required_checks(self, number: int) -> dict[str, Any]:
        pr = await self.client.get_pull_request(int(number))
        head = (pr.data.get("head") or {}).get("sha")
        base = (pr.data.get("base") or {}).get("ref")
        required, _ = await self.client.required_checks(str(base))
        runs = await self.client.check_runs(str(head))
        statuses = await self.client.combined_status(str(head))
        seen: dict[str, str] = {}
        for run in (runs.data or {}).get("check_runs") or []:
            state = run.get("conclusion") if run.get("status") == "completed" else run.get("status")
            seen[str(run.get("name"))] = str(state)
        for st in (statuses.data or {}).get("statuses") or []:
            seen.setdefault(str(st.get("context")), str(st.get("state")))
        checks = [{"name": name, "state": seen.get(name, "missing")} for name in required]
        passing = all(c["state"] in PASSING for c in checks)
        return {
            "status": "ok",
            "request_id": runs.request_id,
            "number": int(number),
            "head_sha": head,
            "base": base,
            "required": checks,
            "passing": passing,
        }

    # writes: request builders (also the tools' previews), then the senders

    def _post_review(self, a: Mapping[str, Any]) -> Request:
        return self.client.review_request(
            int(a["number"]),
            str(a["body"]),
            str(a.get("event") or "COMMENT"),
            list(a.get("comments") or []),
            a.get("commit_id") or None,
        )

    def _comment(self, a: Mapping[str, Any]) -> Request:
        return self.client.comment_request(int(a["number"]), str(a["body"]))

    def _add_labels(self, a: Mapping[str, Any]) -> Request:
        return self.client.labels_request(int(a["number"]), [str(x) for x in a["labels"]])

    def _request_reviewers(self, a: Mapping[str, Any]) -> Request:
        return self.client.reviewers_request(
            int(a["number"]), list(a.get("reviewers") or []), list(a.get("team_reviewers") or [])
        )

    def _set_status(self, a: Mapping[str, Any]) -> Request:
        return self.client.status_request(
            str(a["sha"]),
            str(a["state"]),
            str(a["context"]),
            str(a.get("description") or ""),
            str(a.get("target_url") or ""),
        )

    def _create_check_run(self, a: Mapping[str, Any]) -> Request:
        return self.client.check_run_request(
            str(a["name"]),
            str(a["head_sha"]),
            str(a["conclusion"]),
            str(a["title"]),
            str(a["summary"]),
        )

    def _merge(self, a: Mapping[str, Any]) -> Request:
        return self.client.merge_request(
            int(a["number"]), str(a["sha"]), self.merge_method, str(a.get("commit_title") or "")
        )

    def build(self, name: str, arguments: Mapping[str, Any]) -> Request:
        """The request for a write; an argument the operation does not take is refused
        (never ignored: the model must not believe it chose, e.g., a repository)."""
        unknown = sorted(set(arguments) - set(OPERATIONS[name].parameters["properties"]))
        if unknown:
            raise ValueError(f"{name} takes no argument(s) {', '.join(unknown)}")
        return self.builders()[name](arguments)

    def builders(self) -> dict[str, Callable[[Mapping[str, Any]], Request]]:
        return {
            "github_post_review": self._post_review,
            "github_comment": self._comment,
            "github_add_labels": self._add_labels,
            "github_request_reviewers": self._request_reviewers,
            "github_set_status": self._set_status,
            "github_create_check_run": self._create_check_run,
            "github_merge": self._merge,
        }

    async def write(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        request = self.build(name, arguments)
        got = await self.client.send(request)
        out: dict[str, Any] = {
            "status": "ok",
            "request_id": got.request_id,
            "request": {"method": request.method, "path": request.path},
        }
        data = got.data if isinstance(got.data, dict) else {}
        for key in ("id", "html_url", "sha", "merged", "message", "state", "node_id"):
            if key in data:
                out[key] = data[key]
        if name == "github_add_labels" and isinstance(got.data, list):
            out["labels"] = [lb.get("name") for lb in got.data]
        return out


def _guarded(
    redact: Callable[[Any], Any], handler: Callable[..., Awaitable[dict[str, Any]]]
) -> Callable[..., Awaitable[Any]]:
    """A tool handler: typed errors become observations; everything is redacted."""

    async def run(**arguments: Any) -> Any:
        try:
            return redact(await handler(**arguments))
        except IntegrationError as exc:
            return redact(exc.to_observation())
        except (ValueError, KeyError, TypeError) as exc:
            return redact({"status": "error", "error": "invalid_arguments", "message": str(exc)})

    return run


def github_tools(
    client: GitHubClient,
    *,
    merge_method: str = "squash",
    operations: Sequence[str] | None = None,
) -> list[Tool]:
    """One :class:`~charter.agent.Tool` per GitHub operation (all, or ``operations``)."""
    impl = GitHubTools(client, merge_method=merge_method)
    builders = impl.builders()
    names = list(OPERATIONS) if operations is None else list(operations)
    tools: list[Tool] = []
    for name in names:
        op = OPERATIONS[name]
        if name in builders:
            handler = _guarded(client.redactor, _writer(impl, name))
            preview: Callable[[Mapping[str, Any]], Any] | None = _preview(
                functools.partial(impl.build, name), client
            )
        else:
            handler = _guarded(client.redactor, getattr(impl, name))
            preview = None
        tools.append(
            Tool(
                name=name,
                handler=handler,
                description=op.description,
                parameters=op.parameters,
                annotations=ToolAnnotations(
                    side_effect_level=SideEffectLevel.parse(op.level),
                    kind="other",  # the host is configuration, not an argument
                    capabilities=(op.capability,),
                ),
                is_async=True,
                preview=preview,
            )
        )
    return tools


def _writer(impl: GitHubTools, name: str) -> Callable[..., Awaitable[dict[str, Any]]]:
    # the operation is bound here, never taken from the model's arguments
    async def send(**arguments: Any) -> dict[str, Any]:
        return await impl.write(name, arguments)

    return send


def _preview(
    build: Callable[[Mapping[str, Any]], Request], client: GitHubClient
) -> Callable[[Mapping[str, Any]], Any]:
    def preview(arguments: Mapping[str, Any]) -> Any:
        try:
            request = build(arguments)
        except (ValueError, KeyError, TypeError) as exc:
            return {"error": f"invalid arguments: {exc}"}
        return {"url": client.settings.api_url.rstrip("/") + request.path, **request.to_dict()}

    return preview
