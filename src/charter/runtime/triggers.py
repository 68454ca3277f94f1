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

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


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


def declares_trigger(declared: Iterable[str], provider: str, kind: str) -> bool:
    """Whether ``provider.kind`` matches one of a persona's declared trigger names.

    Matches exactly, by ``provider.*``, or by family (``github.pr_opened`` covers a
    ``github``/``pull_request`` trigger).
    """
    provider, kind = provider.lower(), kind.lower()
    family = trigger_family(provider, kind)
    for name in declared:
        name = name.lower()
        if name == "*":
            return True
        d_provider, _, d_kind = name.partition(".")
        if d_provider != provider:
            continue
        if d_kind in ("*", kind) or trigger_family(provider, d_kind) == family:
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
            found["_kind"] = "pull_request"
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

    ``github`` pull requests ``github:<repo>:pr:<number>``, check runs
    ``github:<repo>:check:<id>``; ``linear`` issues ``linear:issue:<identifier>``;
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
    merged.update({str(k): str(v) for k, v in (metadata or {}).items()})
    kind = (kind or inferred or "").strip().lower()
    if not kind:
        raise TriggerError("a trigger needs a kind (--kind) or a payload it can be inferred from")
    family = trigger_family(provider, kind)

    if provider == "github" and family == "pull_request":
        repo, number = _require(merged, provider, kind, "repository", "number")
        key = f"github:{repo}:pr:{number}"
    elif provider == "github" and family == "check_run":
        (repo,) = _require(merged, provider, kind, "repository")
        ident = _first(merged, "check_run_id", "id", "head_sha", "sha")
        if ident is None:
            raise TriggerError(
                f"github.{kind} trigger needs metadata check_run_id (or id/head_sha)"
            )
        key = f"github:{repo}:check:{ident}"
    elif provider == "github" and family == "issue":
        repo, number = _require(merged, provider, kind, "repository", "number")
        key = f"github:{repo}:issue:{number}"
    elif provider == "linear" and family == "issue":
        ident = _first(merged, "identifier", "issue", "id")
        if ident is None:
            raise TriggerError(f"linear.{kind} trigger needs metadata identifier (or id)")
        key = f"linear:issue:{ident}"
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
    return NormalizedTrigger(provider, kind, family, key, merged)


def parse_metadata(pairs: Iterable[str]) -> dict[str, str]:
    """``["k=v", ...]`` -> dict; a pair without ``=`` is an error."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise TriggerError(f"metadata must be key=value, got {pair!r}")
        out[key.strip()] = value
    return out
