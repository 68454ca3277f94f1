"""Trigger normalisation: provider metadata or a webhook payload -> a stable work key."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from charter.errors import CharterError


class TriggerError(CharterError, ValueError):
    """Trigger input cannot be normalised."""


@dataclass(frozen=True)
class NormalizedTrigger:
    provider: str
    kind: str
    family: str
    work_key: str
    metadata: dict[str, str]
    #: work that a newer trigger with the same coalesce key supersedes while it still
    #: waits in a queue (a push to the same ref, a pull request's new head): the newer
    #: one runs, the older is recorded as superseded by it (``persona.work.coalesced``)
    coalesce_key: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        if out["coalesce_key"] is None:
            del out["coalesce_key"]
        return out


#: pull request actions whose work is the pull request's head commit: a reviewer acts on
#: a head once, whichever of these announced it
PR_HEAD_ACTIONS = frozenset(
    {"opened", "synchronize", "reopened", "ready_for_review", "review_requested"}
)
#: comment and review actions that are the thing itself (its key is its id alone)
_FIRST_ACTIONS = frozenset({"created", "submitted"})


# Event kinds grouped into families: a persona declaring ``github.pr_opened`` accepts a
# ``github`` trigger of any kind in the ``pull_request`` family, and vice versa.
_FAMILIES: dict[str, tuple[tuple[str, str], ...]] = {
    "github": (
        ("pull_request", "pull_request"),
        ("pr", "pull_request"),
        ("check_run", "check_run"),
        ("check_suite", "check_run"),
        ("check", "check_run"),
        ("review", "pull_request"),
        ("issue", "issue"),
        ("push", "push"),
    ),
    "linear": (("issue", "issue"), ("comment", "issue")),
    "slack": (("message", "message"), ("app_mention", "message")),
}


def linear_kind(payload: Mapping[str, Any]) -> str | None:
    """A Linear webhook (``type`` + ``action``) -> the trigger kind personas declare:
    ``Issue``/``create`` is ``issue_created``, ``update`` ``issue_updated``, ``remove``
    ``issue_removed``; ``Comment``/``create`` is ``comment_created`` (family ``issue``:
    its work key is the commented issue's)."""
    kind = str(payload.get("type") or "").lower()
    action = str(payload.get("action") or "").lower()
    verbs = {"create": "created", "update": "updated", "remove": "removed"}
    if kind in ("issue", "comment") and action in verbs:
        return f"{kind}_{verbs[action]}"
    return kind or None


def slack_kind(payload: Mapping[str, Any]) -> str | None:
    """A Slack Events API callback -> its event type (``message``, ``app_mention``);
    ``url_verification`` handshakes are not triggers."""
    if payload.get("type") == "url_verification":
        return None
    event = payload.get("event")
    if isinstance(event, Mapping) and event.get("type"):
        return str(event["type"]).lower()
    return None


def github_kind(event: str | None, payload: Mapping[str, Any]) -> str | None:
    """GitHub's event header and ``action`` -> the trigger kind personas declare.

    ``pull_request``/``opened`` is ``pr_opened``, ``review_requested`` stays
    ``review_requested``, a merged ``closed`` is ``pr_merged``, a failed check run or
    suite is ``check_failed``, ``issues``/``opened`` is ``issue_opened``,
    ``pull_request_review``/``submitted`` is ``review_submitted``.
    """
    if not event:
        return None
    action = payload.get("action")
    action = action if isinstance(action, str) and action else None
    if event == "pull_request":
        if action == "review_requested":
            return "review_requested"
        if action == "closed" and _get(payload, "pull_request", "merged") is True:
            return "pr_merged"
        return f"pr_{action}" if action else "pull_request"
    if event == "pull_request_review":
        return f"review_{action}" if action else "review"
    if event in ("check_run", "check_suite"):
        if _get(payload, event, "conclusion") == "failure":
            return "check_failed"
        prefix = "check" if event == "check_run" else event
        return f"{prefix}_{action}" if action else event
    if event == "issues":
        return f"issue_{action}" if action else "issue"
    return event


def trigger_family(provider: str, kind: str) -> str:
    kind = kind.lower()
    for prefix, family in _FAMILIES.get(provider.lower(), ()):
        if kind == prefix or kind.startswith(prefix + "_") or kind.startswith(prefix + "."):
            return family
    return kind


def _bare(provider: str, kind: str) -> bool:
    """Whether ``kind`` names a whole event family (``pull_request``, ``check_run``,
    ``issue``) rather than one action of it (``pr_opened``, ``check_failed``)."""
    family = trigger_family(provider, kind)
    if kind == family:
        return True
    return any(kind == prefix and fam == family for prefix, fam in _FAMILIES.get(provider, ()))


def declares_trigger(declared: Iterable[str], provider: str, kind: str) -> bool:
    """Whether ``provider.kind`` matches one of a persona's declared trigger names.

    By event **and** action: ``github.review_requested`` is not ``github.pr_opened``.
    A declaration matches its exact kind, every kind by ``*`` or ``provider.*``, and a
    whole family when it names the family itself (``github.pull_request`` covers
    ``pr_opened``, ``review_requested``, ...). A trigger whose kind is itself a bare
    family (``--kind pull_request`` with metadata only: the action is not known) matches
    any declaration in that family.
    """
    provider, kind = provider.lower(), kind.lower()
    family = trigger_family(provider, kind)
    offered_bare = _bare(provider, kind)
    for name in declared:
        name = name.lower()
        if name == "*":
            return True
        d_provider, _, d_kind = name.partition(".")
        if d_provider != provider:
            continue
        if d_kind in ("*", kind):
            return True
        if trigger_family(provider, d_kind) != family:
            continue
        if _bare(provider, d_kind) or offered_bare:
            return True
    return False


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def metadata_from_payload(provider: str, payload: Mapping[str, Any]) -> dict[str, str]:
    """Pick the identifying fields out of a whole webhook payload."""
    provider = provider.lower()
    found: dict[str, Any] = {}
    if provider == "github":
        found["repository"] = _get(payload, "repository", "full_name")
        found["action"] = payload.get("action")
        if isinstance(payload.get("pull_request"), Mapping):
            found["number"] = _get(payload, "pull_request", "number") or payload.get("number")
            found["head_sha"] = _get(payload, "pull_request", "head", "sha")
            found["_kind"] = "pull_request"
            if isinstance(payload.get("review"), Mapping):
                found["review_id"] = _get(payload, "review", "id")
            if isinstance(payload.get("comment"), Mapping):
                found["comment_id"] = _get(payload, "comment", "id")
        elif isinstance(payload.get("check_suite"), Mapping):
            found["check_run_id"] = _get(payload, "check_suite", "id")
            found["head_sha"] = _get(payload, "check_suite", "head_sha")
            found["conclusion"] = _get(payload, "check_suite", "conclusion")
            found["_kind"] = "check_suite"
        elif isinstance(payload.get("check_run"), Mapping):
            found["check_run_id"] = _get(payload, "check_run", "id")
            found["head_sha"] = _get(payload, "check_run", "head_sha")
            found["conclusion"] = _get(payload, "check_run", "conclusion")
            found["_kind"] = "check_run"
        elif isinstance(payload.get("issue"), Mapping):
            found["number"] = _get(payload, "issue", "number")
            found["_kind"] = "issue"
            if isinstance(payload.get("comment"), Mapping):
                found["comment_id"] = _get(payload, "comment", "id")
            if isinstance(_get(payload, "issue", "pull_request"), Mapping):
                # GitHub sends a pull request's conversation comments as issue_comment
                found["pull_request"] = "true"
        elif isinstance(payload.get("ref"), str) and "after" in payload:
            found["ref"] = payload.get("ref")
            found["after"] = payload.get("after")
            found["_kind"] = "push"
        elif payload.get("zen") is not None and payload.get("hook_id") is not None:
            found["hook_id"] = payload.get("hook_id")
            found["_kind"] = "ping"
    elif provider == "linear":
        data = payload.get("data") if isinstance(payload.get("data"), Mapping) else payload
        if str(payload.get("type", "")).lower() == "comment":
            # a comment's work is its issue's
            found["identifier"] = _get(data, "issue", "identifier")
            found["id"] = _get(data, "issue", "id") or _get(data, "issueId")
            found["comment_id"] = _get(data, "id")
            found["author"] = _get(data, "user", "name")
        else:
            found["identifier"] = _get(data, "identifier")
            found["id"] = _get(data, "id")
            found["assignee"] = _get(data, "assignee", "name")
            if str(payload.get("action", "")).lower() == "update":
                found["updated_at"] = _get(data, "updatedAt")
        found["team"] = _get(data, "team", "key") or _get(data, "issue", "team", "key")
        labels = data.get("labels") if isinstance(data, Mapping) else None
        if isinstance(labels, list):
            names = [str(x.get("name")) for x in labels if isinstance(x, Mapping) and x.get("name")]
            found["label"] = ",".join(names) or None
        found["action"] = payload.get("action")
        if linear_kind(payload):
            found["_kind"] = linear_kind(payload)
    elif provider == "slack":
        event = payload.get("event") if isinstance(payload.get("event"), Mapping) else payload
        found["channel"] = _get(event, "channel")
        found["ts"] = _get(event, "ts")
        found["thread_ts"] = _get(event, "thread_ts")
        found["team"] = payload.get("team_id")
        found["user"] = _get(event, "user")
        found["event_id"] = payload.get("event_id")
        if _get(event, "type"):
            found["_kind"] = str(_get(event, "type"))
    else:
        for key in ("id", "delivery_id", "event_id", "key"):
            if payload.get(key) is not None:
                found[key] = payload[key]
        if payload.get("type") or payload.get("event"):
            found["_kind"] = str(payload.get("type") or payload.get("event"))
    return {k: str(v) for k, v in found.items() if v is not None and v != ""}


def _require(metadata: Mapping[str, str], provider: str, kind: str, *keys: str) -> list[str]:
    missing = [k for k in keys if not metadata.get(k)]
    if missing:
        raise TriggerError(
            f"{provider}.{kind} trigger needs metadata {', '.join(missing)} "
            f"(pass --metadata {missing[0]}=...)"
        )
    return [metadata[k] for k in keys]


def _first(metadata: Mapping[str, str], *keys: str) -> str | None:
    for key in keys:
        if metadata.get(key):
            return metadata[key]
    return None


def normalize_trigger(
    provider: str,
    kind: str | None,
    metadata: Mapping[str, str] | None = None,
    *,
    payload: Mapping[str, Any] | None = None,
) -> NormalizedTrigger:
    """Normalise trigger input to a work key.

    ``github``: by what a persona acts on (a push's ref and ``after``, a pull request's
    number and head, a review or comment by its id, an issue by number and action; see
    :func:`_github_key` and docs/runtime.md); ``linear`` issues
    ``linear:issue:<identifier>`` (a comment, an update, a removal with its own suffix);
    ``slack`` messages ``slack:<channel>:<thread_ts or ts>``; anything else
    ``webhook:<provider>:<kind>:<id>`` (or a digest of the metadata when no id is given).
    Explicit metadata wins over fields taken from ``payload``.
    """
    provider = (provider or "").strip().lower()
    if not provider:
        raise TriggerError("a trigger needs a provider")
    merged: dict[str, str] = {}
    if payload is not None:
        if not isinstance(payload, Mapping):
            raise TriggerError("a webhook payload must be a JSON object")
        merged.update(metadata_from_payload(provider, payload))
    inferred = merged.pop("_kind", None)
    if provider == "github" and inferred and not kind and payload is not None:
        # a whole GitHub body without its X-GitHub-Event header (persona trigger --payload):
        # the event from the body's shape, refined by its action as serve does, so that
        # triggers match by event and action here too
        inferred = github_kind(_github_event(inferred, payload), payload) or inferred
    merged.update({str(k): str(v) for k, v in (metadata or {}).items()})
    kind = (kind or inferred or "").strip().lower()
    if not kind:
        raise TriggerError("a trigger needs a kind (--kind) or a payload it can be inferred from")
    family = trigger_family(provider, kind)

    coalesce: str | None = None
    if provider == "github" and family in ("pull_request", "issue", "check_run", "push", "ping"):
        key, coalesce = _github_key(merged, kind, family)
    elif provider == "linear" and family == "issue":
        ident = _first(merged, "identifier", "issue", "id")
        if ident is None:
            raise TriggerError(f"linear.{kind} trigger needs metadata identifier (or id)")
        key = f"linear:issue:{ident}"
        # a comment by its own id, an update by its time, a removal once: each is work
        # of its own (the one key made every later update a duplicate for 24 h)
        if merged.get("comment_id"):
            key += f":comment:{merged['comment_id']}"
        elif kind == "issue_updated" and merged.get("updated_at"):
            key += f":update:{merged['updated_at']}"
        elif kind == "issue_removed":
            key += ":remove"
    elif provider == "slack" and family == "message":
        (channel,) = _require(merged, provider, kind, "channel")
        ts = _first(merged, "thread_ts", "ts")
        if ts is None:
            raise TriggerError(f"slack.{kind} trigger needs metadata ts (or thread_ts)")
        key = f"slack:{channel}:{ts}"
    else:
        ident = _first(merged, "id", "delivery_id", "event_id", "key")
        if ident is None:
            digest = hashlib.sha256(
                json.dumps(merged, sort_keys=True, separators=(",", ":")).encode()
            ).hexdigest()[:16]
            ident = f"sha256:{digest}"
        key = f"webhook:{provider}:{kind}:{ident}"
    return NormalizedTrigger(provider, kind, family, key, merged, coalesce)


def _github_event(shape: str, payload: Mapping[str, Any]) -> str:
    """GitHub's event name for a body of ``shape`` (as :func:`metadata_from_payload`
    found it)."""
    if shape == "pull_request":
        if isinstance(payload.get("review"), Mapping):
            return "pull_request_review"
        if isinstance(payload.get("comment"), Mapping):
            return "pull_request_review_comment"
    if shape == "issue":
        return "issue_comment" if isinstance(payload.get("comment"), Mapping) else "issues"
    return shape


def _github_key(merged: Mapping[str, str], kind: str, family: str) -> tuple[str, str | None]:
    """A GitHub trigger's work key at the grain a persona acts on, and its coalesce key
    (docs/runtime.md, "Work keys of GitHub events")."""
    action = merged.get("action")
    if family == "push":
        repo, ref, after = _require(merged, "github", kind, "repository", "ref", "after")
        return f"github:{repo}:push:{ref}:{after}", f"github:{repo}:push:{ref}"
    if family == "ping":
        (repo,) = _require(merged, "github", kind, "repository")
        return f"github:{repo}:ping:{merged.get('hook_id') or 'hook'}", None
    if family == "check_run":
        (repo,) = _require(merged, "github", kind, "repository")
        ident = _first(merged, "check_run_id", "id", "head_sha", "sha")
        if ident is None:
            raise TriggerError(
                f"github.{kind} trigger needs metadata check_run_id (or id/head_sha)"
            )
        return f"github:{repo}:check:{ident}" + (f":{action}" if action else ""), None
    repo, number = _require(merged, "github", kind, "repository", "number")
    on_pr = family == "pull_request" or merged.get("pull_request") == "true"
    base = f"github:{repo}:{'pr' if on_pr else 'issue'}:{number}"
    tail = f":{action}" if action and action not in _FIRST_ACTIONS else ""
    if merged.get("review_id"):
        return f"{base}:review:{merged['review_id']}{tail}", None
    if merged.get("comment_id"):
        return f"{base}:comment:{merged['comment_id']}{tail}", None
    if family == "issue":
        return base + (f":{action}" if action else ""), None
    sha = merged.get("head_sha")
    if action is None or action in PR_HEAD_ACTIONS:
        # (metadata without a head: the pull request itself, as before)
        return (f"{base}:{sha}", f"{base}:head") if sha else (base, None)
    if action:
        return f"{base}:{action}" + (f":{sha}" if sha else ""), None
    return base, None


def subject_of(work_key: str) -> str:
    """What a work key is about, at the grain outcomes are reported: a pull request or
    issue (``github:<repo>:pr:<number>``), a check (``github:<repo>:check:<id>``), a
    Linear issue (``linear:issue:<identifier>``); other keys are their own subject. A
    review's outcome (``review_submitted``) settles the proposal made on the pull
    request's head, whose work key is finer (issue 31)."""
    parts = work_key.split(":")
    if parts[0] == "github" and len(parts) >= 4 and parts[2] in ("pr", "issue", "check"):
        return ":".join(parts[:4])
    if parts[0] == "linear" and len(parts) >= 3 and parts[1] == "issue":
        return ":".join(parts[:3])
    return work_key


def delivery_id(
    provider: str, headers: Mapping[str, str], payload: Mapping[str, Any]
) -> str | None:
    """The sender's id of one delivery (a redelivery carries the same one), or ``None``:
    GitHub's ``X-GitHub-Delivery`` header, Slack's ``event_id``, Linear's ``webhookId``
    with its ``webhookTimestamp``; any other sender's ``X-Delivery-Id`` header."""
    provider = provider.lower()
    if provider == "github":
        found = headers.get("x-github-delivery")
    elif provider == "slack":
        found = payload.get("event_id")
    elif provider == "linear":
        hook, stamp = payload.get("webhookId"), payload.get("webhookTimestamp")
        found = f"{hook}:{stamp}" if hook and stamp is not None else None
    else:
        found = headers.get("x-delivery-id")
    return f"{provider}:{found}" if found else None


def parse_metadata(pairs: Iterable[str]) -> dict[str, str]:
    """``["k=v", ...]`` -> dict; a pair without ``=`` is an error."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise TriggerError(f"metadata must be key=value, got {pair!r}")
        out[key.strip()] = value
    return out
