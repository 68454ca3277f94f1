"""GitHub's REST objects as the API returns them (the shapes of GitHub's OpenAPI
description, as githubkit's models check them): users, repositories, pull requests,
files, reviews, comments, labels, statuses and check runs.

The ``*_url`` fields follow GitHub's own URL templates under ``api.github.com`` /
``github.com``, so a client that follows them sees what it would see on GitHub.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

API = "https://api.github.com"
WEB = "https://github.com"
STAMP = "2026-11-28T09:00:00Z"


def node_id(kind: str, ident: int | str) -> str:
    return f"{kind}_" + base64.b64encode(f"{kind}:{ident}".encode()).decode().rstrip("=")


def number_id(text: str) -> int:
    return int(hashlib.sha1(text.encode()).hexdigest()[:7], 16)


def user(login: str, kind: str = "User") -> dict[str, Any]:
    uid = number_id(login)
    u = f"{API}/users/{login}"
    return {
        "login": login,
        "id": uid,
        "node_id": node_id("U", uid),
        "avatar_url": f"https://avatars.githubusercontent.com/u/{uid}?v=4",
        "gravatar_id": "",
        "url": u,
        "html_url": f"{WEB}/{login}",
        "followers_url": f"{u}/followers",
        "following_url": f"{u}/following{{/other_user}}",
        "gists_url": f"{u}/gists{{/gist_id}}",
        "starred_url": f"{u}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{u}/subscriptions",
        "organizations_url": f"{u}/orgs",
        "repos_url": f"{u}/repos",
        "events_url": f"{u}/events{{/privacy}}",
        "received_events_url": f"{u}/received_events",
        "type": kind,
        "site_admin": False,
        "user_view_type": "public",
    }


def repository(full_name: str, default_branch: str = "main") -> dict[str, Any]:
    owner, name = full_name.split("/", 1)
    rid = number_id(full_name)
    r = f"{API}/repos/{full_name}"
    templated = {
        "archive_url": f"{r}/{{archive_format}}{{/ref}}",
        "assignees_url": f"{r}/assignees{{/user}}",
        "blobs_url": f"{r}/git/blobs{{/sha}}",
        "branches_url": f"{r}/branches{{/branch}}",
        "collaborators_url": f"{r}/collaborators{{/collaborator}}",
        "comments_url": f"{r}/comments{{/number}}",
        "commits_url": f"{r}/commits{{/sha}}",
        "compare_url": f"{r}/compare/{{base}}...{{head}}",
        "contents_url": f"{r}/contents/{{+path}}",
        "contributors_url": f"{r}/contributors",
        "deployments_url": f"{r}/deployments",
        "downloads_url": f"{r}/downloads",
        "events_url": f"{r}/events",
        "forks_url": f"{r}/forks",
        "git_commits_url": f"{r}/git/commits{{/sha}}",
        "git_refs_url": f"{r}/git/refs{{/sha}}",
        "git_tags_url": f"{r}/git/tags{{/sha}}",
        "issue_comment_url": f"{r}/issues/comments{{/number}}",
        "issue_events_url": f"{r}/issues/events{{/number}}",
        "issues_url": f"{r}/issues{{/number}}",
        "keys_url": f"{r}/keys{{/key_id}}",
        "labels_url": f"{r}/labels{{/name}}",
        "languages_url": f"{r}/languages",
        "merges_url": f"{r}/merges",
        "milestones_url": f"{r}/milestones{{/number}}",
        "notifications_url": f"{r}/notifications{{?since,all,participating}}",
        "pulls_url": f"{r}/pulls{{/number}}",
        "releases_url": f"{r}/releases{{/id}}",
        "stargazers_url": f"{r}/stargazers",
        "statuses_url": f"{r}/statuses/{{sha}}",
        "subscribers_url": f"{r}/subscribers",
        "subscription_url": f"{r}/subscription",
        "tags_url": f"{r}/tags",
        "teams_url": f"{r}/teams",
        "trees_url": f"{r}/git/trees{{/sha}}",
        "hooks_url": f"{r}/hooks",
    }
    return {
        "id": rid,
        "node_id": node_id("R", rid),
        "name": name,
        "full_name": full_name,
        "private": False,
        "owner": user(owner, "Organization"),
        "html_url": f"{WEB}/{full_name}",
        "description": None,
        "fork": False,
        "url": r,
        **templated,
        "git_url": f"git://github.com/{full_name}.git",
        "ssh_url": f"git@github.com:{full_name}.git",
        "clone_url": f"{WEB}/{full_name}.git",
        "svn_url": f"{WEB}/{full_name}",
        "mirror_url": None,
        "homepage": None,
        "language": "Python",
        "forks_count": 0,
        "forks": 0,
        "stargazers_count": 0,
        "watchers_count": 0,
        "watchers": 0,
        "size": 100,
        "default_branch": default_branch,
        "open_issues_count": 0,
        "open_issues": 0,
        "is_template": False,
        "topics": [],
        "has_issues": True,
        "has_projects": True,
        "has_wiki": False,
        "has_pages": False,
        "has_downloads": True,
        "has_discussions": False,
        "archived": False,
        "disabled": False,
        "visibility": "public",
        "license": None,
        "pushed_at": STAMP,
        "created_at": STAMP,
        "updated_at": STAMP,
        "allow_forking": True,
        "web_commit_signoff_required": False,
    }


def links(repo: str, number: int) -> dict[str, Any]:
    r = f"{API}/repos/{repo}"
    return {
        "self": {"href": f"{r}/pulls/{number}"},
        "html": {"href": f"{WEB}/{repo}/pull/{number}"},
        "issue": {"href": f"{r}/issues/{number}"},
        "comments": {"href": f"{r}/issues/{number}/comments"},
        "review_comments": {"href": f"{r}/pulls/{number}/comments"},
        "review_comment": {"href": f"{r}/pulls/comments{{/number}}"},
        "commits": {"href": f"{r}/pulls/{number}/commits"},
        "statuses": {"href": f"{r}/statuses/HEAD"},
    }


def label(repo: str, name: str, index: int) -> dict[str, Any]:
    lid = number_id(f"{repo}:{name}")
    return {
        "id": lid,
        "node_id": node_id("LA", lid),
        "url": f"{API}/repos/{repo}/labels/{name}",
        "name": name,
        "description": None,
        "color": "ededed",
        "default": False,
        "archived_at": None,
        "archived_by": None,
    }


def diff_entry(repo: str, head_sha: str, file: dict[str, Any]) -> dict[str, Any]:
    name = file["filename"]
    return {
        "sha": hashlib.sha1(f"{head_sha}:{name}".encode()).hexdigest(),
        **file,
        "blob_url": f"{WEB}/{repo}/blob/{head_sha}/{name}",
        "raw_url": f"{WEB}/{repo}/raw/{head_sha}/{name}",
        "contents_url": f"{API}/repos/{repo}/contents/{name}?ref={head_sha}",
    }


def check_run(repo: str, run: dict[str, Any]) -> dict[str, Any]:
    rid = run["id"]
    done = run["status"] == "completed"
    return {
        "id": rid,
        "node_id": node_id("CR", rid),
        "head_sha": run["head_sha"],
        "external_id": "",
        "url": f"{API}/repos/{repo}/check-runs/{rid}",
        "html_url": f"{WEB}/{repo}/runs/{rid}",
        "details_url": f"{WEB}/{repo}/runs/{rid}",
        "status": run["status"],
        "conclusion": run["conclusion"] if done else None,
        "started_at": STAMP,
        "completed_at": STAMP if done else None,
        "name": run["name"],
        "output": {
            "title": None,
            "summary": None,
            "text": None,
            "annotations_count": 0,
            "annotations_url": f"{API}/repos/{repo}/check-runs/{rid}/annotations",
            **(run.get("output") or {}),
        },
        "check_suite": {"id": rid + 7},
        "app": None,
        "pull_requests": [],
    }


def status(repo: str, sha: str, item: dict[str, Any]) -> dict[str, Any]:
    sid = item["id"]
    creator = user("charter-bot", "Bot")
    return {
        "url": f"{API}/repos/{repo}/statuses/{sha}",
        "avatar_url": creator["avatar_url"],
        "id": sid,
        "node_id": node_id("SC", sid),
        "state": item["state"],
        "description": item.get("description"),
        "target_url": item.get("target_url"),
        "context": item.get("context", "default"),
        "created_at": STAMP,
        "updated_at": STAMP,
        "creator": creator,
    }
