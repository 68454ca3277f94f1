"""Approval policies: ordered ``allow`` / ``ask`` / ``deny`` rules over calls the ceiling allows.

A capability policy (a :class:`~charter.policy.Policy` stack) decides what *may* happen.
An approval policy decides, for a call the stack already allows, whether it runs as is,
needs a human (``ask``) or is refused. Its rules are written in the same language: a
rule's ``match`` is a policy dict (``tools``, ``commands``, ``paths``, ``network``,
``mcp_servers``, ``members``, ...) and the rule matches a call when that policy, alone,
would allow the call *and* the call has a subject in every dimension the match names (a
``commands`` match never matches a tool that runs no command). A few keys describe the
call rather than its subjects: ``side_effect_level`` (at least this level),
``max_side_effect_level`` (at most), ``kind`` (tool kinds), ``calls_at_least`` (this
tool was already called N times in the session), ``agent`` (globs over the loop's
``policy_label``), ``args`` (globs over argument values) and ``predicate`` (a callable
over the arguments, for embedding hosts).

Seed 001: deny wins over ask, ask wins over allow, unmatched calls are approved (or get
``default``). Every matched decision names its rule and rationale (the ``policyDecision``
receipt).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wcmatch import fnmatch

from .call import ToolCall
from .decision import Decision, Outcome
from .engine import _NO_SUBJECTS, _Denied, _Subjects, decide
from .errors import PolicyError, PolicyIssue
from .frame import Frame
from .levels import SideEffectLevel
from .model import Policy
from .paths import SENSITIVE_PATHS, PathContext

_GLOB = fnmatch.BRACE | fnmatch.IGNORECASE
#: ``match`` keys that describe the call, not a policy dimension.
_CALL_KEYS = (
    "side_effect_level",
    "max_side_effect_level",
    "kind",
    "calls_at_least",
    "agent",
    "args",
    "predicate",
)
#: Policy dimensions a match may restrict, and how a call shows it has such a subject.
_SUBJECT_DIMS = ("commands", "bash", "shell", "paths", "network")
_RULE_KEYS = ("decision", "match", "name", "rationale")
_DECISIONS = {"allow": Outcome.ALLOW, "ask": Outcome.ASK, "deny": Outcome.DENY}
_RANK = {Outcome.ALLOW: 0, Outcome.ASK: 1, Outcome.DENY: 2}


def _fail(path: str, message: str) -> PolicyError:
    return PolicyError([PolicyIssue(path, message)])


def _globs(path: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise _fail(path, f"expected a string or a list of strings, got {value!r}")


@dataclass(frozen=True)
class CallFacts:
    """What an approval rule may know about a call beyond its arguments."""

    calls_before: int = 0
    agent: str | None = None


@dataclass(frozen=True)
class ApprovalRule:
    """One rule: when ``match`` matches, the call gets ``decision``."""

    decision: Outcome
    name: str
    rationale: str | None = None
    policy: Policy | None = None
    subject_dims: tuple[str, ...] = ()
    min_level: SideEffectLevel | None = None
    max_level: SideEffectLevel | None = None
    kinds: tuple[str, ...] = ()
    calls_at_least: int | None = None
    labels: tuple[tuple[str, tuple[str, ...]], ...] = ()
    args: tuple[tuple[str, tuple[str, ...]], ...] = ()
    predicate: Callable[[Mapping[str, Any]], Any] | None = None

    @classmethod
    def parse(cls, data: Any, path: str) -> ApprovalRule:
        if not isinstance(data, Mapping):
            raise _fail(path, f"expected a rule table, got {data!r}")
        unknown = sorted(set(data) - set(_RULE_KEYS))
        if unknown:
            raise _fail(f"{path}.{unknown[0]}", f"unknown key (expected {', '.join(_RULE_KEYS)})")
        decision = _DECISIONS.get(str(data.get("decision")))
        if decision is None:
            raise _fail(f"{path}.decision", "expected allow, ask or deny")
        match = data.get("match") or {}
        if not isinstance(match, Mapping):
            raise _fail(f"{path}.match", "expected a table")
        dims = {k: v for k, v in match.items() if k not in _CALL_KEYS}
        policy = None
        if dims:
            spec: dict[str, Any] = {}
            for key, value in dims.items():
                spec[key] = (
                    {"allow": list(_globs(f"{path}.match.{key}", value))}
                    if isinstance(value, (str, list, tuple))
                    else value
                )
            # matching is about the rule's subjects only: sensitive paths are decided by
            # the capability stack, not hidden from a rule that names them
            spec["allow_sensitive"] = sorted(SENSITIVE_PATHS)
            try:
                policy = Policy.from_dict(spec)
            except PolicyError as exc:
                raise PolicyError(
                    [PolicyIssue(f"{path}.match.{i.field_path}", i.message) for i in exc.issues]
                ) from None
        levels: dict[str, SideEffectLevel | None] = {}
        for key in ("side_effect_level", "max_side_effect_level"):
            level = match.get(key)
            try:
                levels[key] = None if level is None else SideEffectLevel.parse(level)
            except (ValueError, KeyError) as exc:
                raise _fail(f"{path}.match.{key}", str(exc)) from None
        count = match.get("calls_at_least")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int)):
            raise _fail(f"{path}.match.calls_at_least", "expected an integer")
        args = match.get("args") or {}
        if not isinstance(args, Mapping):
            raise _fail(f"{path}.match.args", "expected a table of argument globs")
        predicate = match.get("predicate")
        if predicate is not None and not callable(predicate):
            raise _fail(f"{path}.match.predicate", "expected a callable over the arguments")
        name = data.get("name") or f"rule[{path.rsplit('[', 1)[-1].rstrip(']')}]"
        return cls(
            decision=decision,
            name=str(name),
            rationale=None if data.get("rationale") is None else str(data["rationale"]),
            policy=policy,
            subject_dims=tuple(
                "commands" if k in ("bash", "shell") else k for k in dims if k in _SUBJECT_DIMS
            ),
            min_level=levels["side_effect_level"],
            max_level=levels["max_side_effect_level"],
            kinds=_globs(f"{path}.match.kind", match["kind"]) if "kind" in match else (),
            calls_at_least=count,
            labels=tuple(
                (k, _globs(f"{path}.match.{k}", match[k])) for k in ("agent",) if k in match
            ),
            args=tuple((str(k), _globs(f"{path}.match.args.{k}", v)) for k, v in args.items()),
            predicate=predicate,
        )

    def matches(
        self, call: ToolCall, subjects: _Subjects, context: PathContext | None, facts: CallFacts
    ) -> bool:
        if self.min_level is not None and call.level < int(self.min_level):
            return False
        if self.max_level is not None and call.level > int(self.max_level):
            return False
        if self.kinds and not fnmatch.fnmatch(call.annotations.kind or "", self.kinds, flags=_GLOB):
            return False
        if self.calls_at_least is not None and facts.calls_before < self.calls_at_least:
            return False
        for key, globs in self.labels:
            value = getattr(facts, key)
            if value is None or not fnmatch.fnmatch(value, globs, flags=_GLOB):
                return False
        for arg, globs in self.args:
            value = call.arguments.get(arg)
            if not isinstance(value, str) or not fnmatch.fnmatch(value, globs, flags=_GLOB):
                return False
        try:
            for dim in self.subject_dims:
                present = {
                    "commands": subjects.commands,
                    "paths": subjects.paths,
                    "network": subjects.hosts,
                }[dim]()
                if not present:
                    return False
        except _Denied:
            return False
        if self.policy is not None:
            verdict = decide(call, [Frame(self.policy, self.name, "approval")], context=context)
            if not verdict.allowed:
                return False
        if self.predicate is not None:
            return bool(self.predicate(dict(call.arguments)))
        return True


@dataclass(frozen=True)
class ApprovalPolicy:
    """Ordered approval rules; the strongest matching decision wins (deny > ask > allow)."""

    rules: tuple[ApprovalRule, ...] = ()
    default: Outcome = Outcome.ALLOW
    label: str = "approval_policy"
    default_rationale: str | None = None

    @classmethod
    def from_dict(cls, data: Any, *, label: str = "approval_policy") -> ApprovalPolicy:
        """Parse ``{rules: [...], default?}``; errors name the field path."""
        if not isinstance(data, Mapping):
            raise _fail(label, f"expected a table with rules, got {data!r}")
        unknown = sorted(set(data) - {"rules", "default"})
        if unknown:
            raise _fail(f"{label}.{unknown[0]}", "unknown key (expected rules, default)")
        rules = data.get("rules") or []
        if not isinstance(rules, Sequence) or isinstance(rules, str):
            raise _fail(f"{label}.rules", "expected a list of rules")
        default = _DECISIONS.get(str(data.get("default", "allow")))
        if default is None:
            raise _fail(f"{label}.default", "expected allow, ask or deny")
        return cls(
            tuple(ApprovalRule.parse(r, f"{label}.rules[{i}]") for i, r in enumerate(rules)),
            default,
            label,
        )

    def decide(
        self,
        call: ToolCall,
        *,
        context: PathContext | None = None,
        facts: CallFacts | None = None,
    ) -> Decision:
        """The approval decision on ``call`` (which the capability stack already allowed)."""
        facts = facts or CallFacts()
        subjects = _Subjects(call, context) if call.has_subjects else _NO_SUBJECTS
        best: ApprovalRule | None = None
        for rule in self.rules:
            if (best is None or _RANK[rule.decision] > _RANK[best.decision]) and rule.matches(
                call, subjects, context, facts
            ):
                best = rule
                if rule.decision is Outcome.DENY:
                    break
        if best is None:
            reason = self.default_rationale or f"no approval rule matched: {self.default.value}"
            return Decision(
                self.default,
                call.name,
                reason,
                frame_label=self.label,
                frame_kind="approval",
                dimension="approval",
                rule="default",
            )
        why = best.rationale or f"approval rule '{best.name}' says {best.decision.value}"
        return Decision(
            best.decision,
            call.name,
            why,
            frame_label=self.label,
            frame_kind="approval",
            dimension="approval",
            rule=best.name,
        )


def policy_decision_receipt(decision: Decision) -> dict[str, Any]:
    """The ``policyDecision`` receipt an ask request and its transcript event carry."""
    return {
        "decision": decision.outcome.value,
        "rule": decision.rule,
        "rationale": decision.reason,
        "policy": decision.frame_label,
    }
