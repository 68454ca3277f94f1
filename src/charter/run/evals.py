"""Eval packs: run a persona on a fixture and check what it did (``charter persona eval``).

An eval file (``evals/<name>.toml`` next to the manifest) names the persona, a fixture
(a trigger envelope ``{provider, kind, metadata, payload?}``), optionally a ``mock``
script for the mock provider and what a human answers to approvals (``approve =
"deny"`` by default: nobody is there), and ``expect``: the checks. The persona runs with
its own charter in a scratch copy of the project (its own state, its own workspace), so
an eval never touches real state; every check is judged from the run record.

Checks (an unknown one is an error, never ignored):

``status``            the run's status (``completed``, ``failed``, ...)
``receipt``           whether the run left receipts
``output_contains``   a string (or list: all of them) in the run's result
``classified_as``     at least one of these words in the result (case-insensitive)
``merged``            whether ``github_merge`` (or a ``github`` call with ``action =
                      "merge"``) executed
``acknowledged``      whether ``pagerduty_acknowledge`` (or a ``pagerduty`` call with
                      ``action = "acknowledge"``) executed
``comments_only``     every GitHub write (executed, proposed or dry-run) only comments or
                      reviews
``workspace_writes``  how many write/edit calls executed
``handoff_to``        the run handed off, and only to these targets
``paged``             each of these targets got a handoff
``tools_executed``    each of these tools executed at least once
``tools_not_executed``none of these tools executed
``user_replies``      how many times the simulated user replied
``user_stopped``      whether the simulated user chose to stop

A simulated user (``user = [{match, reply | action}, ...]``, ``user_max_replies``: seed
001's ``scripted_user``) answers the run's ``ask_user`` tool; without one, ``ask_user``
says no user is attached. Its audit (``simulated_user_*`` events) is in the outcome.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from charter.manifest import Persona

from .approvals import CallbackApprover
from .engine import RunResult, run_persona
from .errors import RunError
from .session import RunOptions

WRITE_TOOLS = frozenset({"write", "edit", "multiedit", "notebookedit"})
_SKIP = shutil.ignore_patterns(".charter", "state", "__pycache__", ".fake_github", ".git")


class EvalError(RunError):
    """An eval file that cannot be run (names the file and the field)."""


@dataclass(frozen=True)
class EvalCase:
    name: str
    persona: str
    source: Path
    fixture: Path
    expect: Mapping[str, Any]
    mock: Path | None = None
    approve: str = "deny"
    user: tuple[Any, ...] | None = None
    user_max_replies: int | None = None


@dataclass
class Check:
    key: str
    expected: Any
    actual: Any
    ok: bool

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.key, "expected": self.expected, "actual": self.actual, "ok": self.ok}


@dataclass
class EvalOutcome:
    case: EvalCase
    checks: list[Check] = field(default_factory=list)
    run: dict[str, Any] | None = None
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.error is None and all(c.ok for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "eval": self.case.name,
            "persona": self.case.persona,
            "file": str(self.case.source),
            "passed": self.passed,
            "error": self.error,
            "checks": [c.to_dict() for c in self.checks],
            "run": {k: (self.run or {}).get(k) for k in ("status", "run_id", "work_key")},
            "simulated_user": (self.run or {}).get("simulated_user"),
        }


def _fail(source: Path, path: str, message: str) -> EvalError:
    return EvalError(f"{source}: {path}: {message}" if path else f"{source}: {message}")


def load_case(source: Path, persona: str) -> EvalCase:
    """Read and check one eval file."""
    try:
        data = tomllib.loads(source.read_text(encoding="utf-8"))
    except OSError as exc:
        raise _fail(source, "", f"cannot read the eval file ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise _fail(source, "", f"invalid TOML: {exc}") from None
    known = {
        "name",
        "persona",
        "fixture",
        "mock",
        "approve",
        "expect",
        "description",
        "user",
        "user_max_replies",
    }
    for key in data:
        if key not in known:
            raise _fail(source, key, f"unknown field (expected one of: {', '.join(sorted(known))})")
    if data.get("persona", persona) != persona:
        raise _fail(source, "persona", f"this eval is for {data['persona']!r}, not {persona!r}")
    fixture = data.get("fixture")
    if not isinstance(fixture, str):
        raise _fail(source, "fixture", "expected the path of a trigger envelope (a string)")
    expect = data.get("expect")
    if not isinstance(expect, dict) or not expect:
        raise _fail(source, "expect", "expected a table with at least one check")
    for key in expect:
        if key not in CHECKS:
            raise _fail(
                source, f"expect.{key}", f"unknown check (known: {', '.join(sorted(CHECKS))})"
            )
    approve = data.get("approve", "deny")
    if approve not in ("deny", "grant"):
        raise _fail(source, "approve", f"expected 'deny' or 'grant', got {approve!r}")
    mock = data.get("mock")
    if mock is not None and not isinstance(mock, str):
        raise _fail(source, "mock", "expected the path of a mock script (a string)")
    user = data.get("user")
    if user is not None:
        if not isinstance(user, list) or not user:
            raise _fail(source, "user", "expected a list of script entries ({match, reply})")
        from charter.agent import AgentOptionError, scripted_user

        try:
            scripted_user(user)
        except (AgentOptionError, TypeError, ValueError) as exc:
            raise _fail(source, "user", str(exc)) from None
    max_replies = data.get("user_max_replies")
    if max_replies is not None and (
        isinstance(max_replies, bool) or not isinstance(max_replies, int)
    ):
        raise _fail(source, "user_max_replies", "expected an integer")
    if any(k in expect for k in ("user_replies", "user_stopped")) and user is None:
        raise _fail(source, "expect", "user_replies / user_stopped need a simulated user (user)")
    base = source.parent
    return EvalCase(
        name=str(data.get("name") or source.stem),
        persona=persona,
        source=source,
        fixture=(base / fixture).resolve(),
        expect=expect,
        mock=(base / mock).resolve() if mock else None,
        approve=approve,
        user=None if user is None else tuple(user),
        user_max_replies=max_replies,
    )


def cases_for(persona: Persona, project: Path) -> list[EvalCase]:
    """The persona's eval packs (``evals/<name>.toml`` under the project)."""
    out = []
    for name in persona.evals:
        source = project / "evals" / f"{name}.toml"
        if not source.is_file():
            raise EvalError(f"{persona.name}: eval pack {name!r} not found (looked for {source})")
        out.append(load_case(source, persona.name))
    return out


def run_case(case: EvalCase, project: Path, *, llm: str | None = None) -> EvalOutcome:
    """Run one eval in a scratch copy of ``project`` and judge it."""
    outcome = EvalOutcome(case)
    try:
        envelope = json.loads(case.fixture.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        outcome.error = f"{case.source}: fixture: cannot read {case.fixture}: {exc}"
        return outcome
    if not isinstance(envelope, dict) or not envelope.get("provider"):
        outcome.error = f"{case.source}: fixture: expected an envelope with a provider"
        return outcome
    spec = llm or (f"mock:{case.mock}" if case.mock else "mock")
    user = None
    if case.user is not None:
        from charter.agent import scripted_user

        user = scripted_user(list(case.user), {"max_replies": case.user_max_replies})
    with tempfile.TemporaryDirectory(prefix="charter-eval-") as tmp:
        scratch = Path(tmp) / "project"
        shutil.copytree(project, scratch, ignore=_SKIP)
        options = RunOptions(
            manifest=scratch,
            state_dir=Path(tmp) / "state",
            llm=spec,
            workspace=scratch,
            approver=CallbackApprover(lambda _request: case.approve == "grant", by="eval"),
            user=user,
        )
        try:
            result: RunResult = run_persona(
                case.persona,
                provider=str(envelope["provider"]),
                kind=envelope.get("kind"),
                metadata={str(k): str(v) for k, v in (envelope.get("metadata") or {}).items()},
                payload=envelope.get("payload"),
                options=options,
            )
        except RunError as exc:
            outcome.error = str(exc)
            return outcome
    run = result.to_dict()
    if user is not None:
        run["simulated_user"] = {
            "replies": user.replies,
            "audit": list(user.audit),
            "stopped": any(a["event_type"] == "simulated_user_stop" for a in user.audit),
        }
    outcome.run = run
    for key, expected in case.expect.items():
        actual, ok = CHECKS[key](run, expected)
        outcome.checks.append(Check(key, expected, actual, ok))
    return outcome


# -- checks: (run record, expected) -> (actual, ok) -----------------------------------------


def _calls(run: Mapping[str, Any], *, executed_only: bool = True) -> list[dict[str, Any]]:
    calls = [c for c in run.get("tool_calls") or [] if c.get("executed")]
    if not executed_only:
        calls += list(run.get("proposals") or []) + list(run.get("dry_runs") or [])
    return calls


def _action_ran(tool: str, action: str) -> Callable[[Mapping[str, Any], Any], tuple[Any, bool]]:
    # charter.tools names one tool per operation (github_merge); a single tool with an
    # ``action`` argument counts too
    def check(run: Mapping[str, Any], expected: Any) -> tuple[Any, bool]:
        ran = any(
            c.get("tool") == f"{tool}_{action}"
            or (c.get("tool") == tool and (c.get("arguments") or {}).get("action") == action)
            for c in _calls(run)
        )
        return ran, ran == bool(expected)

    return check


def _targets(run: Mapping[str, Any]) -> list[str]:
    return [
        str(h.get("target")) for h in run.get("handoffs") or [] if h.get("status") == "dispatched"
    ]


def _as_list(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def _status(run: Mapping[str, Any], expected: Any) -> tuple[Any, bool]:
    return run.get("status"), run.get("status") == expected


def _receipt(run: Mapping[str, Any], expected: Any) -> tuple[Any, bool]:
    count = len(run.get("receipts") or [])
    return count, (count > 0) == bool(expected)


def _text(run: Mapping[str, Any]) -> str:
    return json.dumps(run.get("result"), default=str)


def _contains(run: Mapping[str, Any], expected: Any) -> tuple[Any, bool]:
    text = _text(run)
    missing = [s for s in _as_list(expected) if s not in text]
    return ({"missing": missing} if missing else "all present"), not missing


def _classified(run: Mapping[str, Any], expected: Any) -> tuple[Any, bool]:
    text = _text(run).lower()
    found = [w for w in _as_list(expected) if w.lower() in text]
    return found, bool(found)


_GITHUB_COMMENTS = frozenset({"comment", "review", "post_review"})


def _comments_only(run: Mapping[str, Any], expected: Any) -> tuple[Any, bool]:
    actions = sorted(
        {
            str((c.get("arguments") or {}).get("action"))
            if c.get("tool") == "github"
            else str(c.get("tool"))[len("github_") :]
            for c in _calls(run, executed_only=False)
            if c.get("tool") == "github" or str(c.get("tool")).startswith("github_")
        }
    )
    # reads are not actions: only the writes must be comments or reviews
    only = all(a in _GITHUB_COMMENTS or a.startswith(("get_", "list_")) for a in actions)
    return actions, only == bool(expected)


def _writes(run: Mapping[str, Any], expected: Any) -> tuple[Any, bool]:
    count = sum(1 for c in _calls(run) if c.get("tool") in WRITE_TOOLS)
    return count, count == int(expected)


def _handoff_to(run: Mapping[str, Any], expected: Any) -> tuple[Any, bool]:
    targets = _targets(run)
    allowed = set(_as_list(expected))
    return targets, bool(targets) and all(t in allowed for t in targets)


def _paged(run: Mapping[str, Any], expected: Any) -> tuple[Any, bool]:
    targets = _targets(run)
    return targets, all(t in targets for t in _as_list(expected))


def _executed(run: Mapping[str, Any], expected: Any) -> tuple[Any, bool]:
    ran = sorted({str(c.get("tool")) for c in _calls(run)})
    return ran, all(t in ran for t in _as_list(expected))


def _not_executed(run: Mapping[str, Any], expected: Any) -> tuple[Any, bool]:
    ran = sorted({str(c.get("tool")) for c in _calls(run)})
    return ran, not any(t in ran for t in _as_list(expected))


def _user_replies(run: Mapping[str, Any], expected: Any) -> tuple[Any, bool]:
    actual = (run.get("simulated_user") or {}).get("replies", 0)
    return actual, actual == expected


def _user_stopped(run: Mapping[str, Any], expected: Any) -> tuple[Any, bool]:
    actual = bool((run.get("simulated_user") or {}).get("stopped"))
    return actual, actual == bool(expected)


CHECKS: dict[str, Callable[[Mapping[str, Any], Any], tuple[Any, bool]]] = {
    "user_replies": _user_replies,
    "user_stopped": _user_stopped,
    "status": _status,
    "receipt": _receipt,
    "output_contains": _contains,
    "classified_as": _classified,
    "merged": _action_ran("github", "merge"),
    "acknowledged": _action_ran("pagerduty", "acknowledge"),
    "comments_only": _comments_only,
    "workspace_writes": _writes,
    "handoff_to": _handoff_to,
    "paged": _paged,
    "tools_executed": _executed,
    "tools_not_executed": _not_executed,
}


__all__ = [
    "CHECKS",
    "Check",
    "EvalCase",
    "EvalError",
    "EvalOutcome",
    "cases_for",
    "load_case",
    "run_case",
]
