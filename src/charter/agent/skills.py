"""Skills: registration, BM25 matching, activation, and the policy frame a skill pushes.

A :class:`Skill` bundles metadata (``description``, ``when_to_use``, ``paths``), a prompt
fragment and an optional ``allowed_tools`` list. The loop matches skills against the
task at the head of iteration 1 (and before every iteration when ``sticky`` is false),
activates the best ``top_n`` and weaves their prompts into the system prompt.

``allowed_tools`` is enforced as a frame on the policy stack (``kind="skill"``), the
union over the active skills plus the runtime's own ``skill`` tool: the surface the
model sees and every dispatch are decided through :mod:`charter.policy`, and the frame
intersects with everything below it, so a skill can narrow but never widen.

Events (``result.transcript["events"]``): ``skill_matched`` once per match pass
(zero-candidate passes included), ``skill_activated`` / ``skill_deactivated`` per
transition, ``skill_scope_tools`` per activation that narrowed the tools, and
``skill_denied`` when the stack forbids a matched skill.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from wcmatch import glob as wglob

from charter.policy import Policy, Rules, decide_current_resource, with_execution_policy
from charter.policy.names import canonical_name

from .hooks import LoopHook
from .options import AgentOptionError

#: Tools a skill frame never hides: the runtime's own scaffolding (the stack below may).
RUNTIME_TOOLS: tuple[str, ...] = ("skill",)

_FIELDS = {
    "name": "name",
    "description": "description",
    "prompt": "prompt",
    "when_to_use": "when_to_use",
    "paths": "paths",
    "allowed_tools": "allowed_tools",
    "disable_model_invocation": "disable_model_invocation",
    "disable-model-invocation": "disable_model_invocation",
    "user_invocable": "user_invocable",
    "user-invocable": "user_invocable",
    "mcp": "mcp",
    "on_activate": "on_activate",
    "on_deactivate": "on_deactivate",
}

Hook = Callable[..., Any]


def _strings(where: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise AgentOptionError(where, f"expected a list of strings, got {value!r}")
    return tuple(value)


@dataclass(frozen=True)
class Skill:
    """A typed skill (seed 001 "Skills lifecycle"). Build one directly or with
    :func:`skill_define`; ``allowed_tools=None`` leaves the tool surface alone, ``[]``
    allows only the runtime's own tools while the skill is active."""

    name: str
    description: str = ""
    prompt: str = ""
    when_to_use: str = ""
    paths: tuple[str, ...] = ()
    allowed_tools: tuple[str, ...] | None = None
    disable_model_invocation: bool = False
    user_invocable: bool = True
    mcp: tuple[str, ...] = ()
    on_activate: Hook | None = field(default=None, compare=False, repr=False)
    on_deactivate: Hook | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise AgentOptionError("skills", f"a skill needs a non-blank name, got {self.name!r}")
        where = f"skills.{self.name}"
        for key in ("description", "prompt", "when_to_use"):
            if not isinstance(getattr(self, key), str):
                raise AgentOptionError(f"{where}.{key}", "expected a string")
        object.__setattr__(self, "paths", _strings(f"{where}.paths", self.paths))
        object.__setattr__(self, "mcp", _strings(f"{where}.mcp", self.mcp))
        if self.allowed_tools is not None:
            tools = _strings(f"{where}.allowed_tools", self.allowed_tools)
            object.__setattr__(self, "allowed_tools", tuple(canonical_name(t) for t in tools))
        for key in ("on_activate", "on_deactivate"):
            value = getattr(self, key)
            if value is not None and not callable(value):
                raise AgentOptionError(f"{where}.{key}", "expected a callable")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "skills") -> Skill:
        """A skill from a dict or frontmatter (``disable-model-invocation`` accepted)."""
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            target = _FIELDS.get(str(key))
            if target is None:
                raise AgentOptionError(
                    f"{where}.{key}", f"unknown skill field; expected one of {', '.join(_FIELDS)}"
                )
            kwargs[target] = value
        if "name" not in kwargs:
            raise AgentOptionError(f"{where}.name", "a skill needs a name")
        return cls(**kwargs)

    def document(self) -> str:
        """The text BM25 ranks: name, description and ``when_to_use``."""
        name = re.sub(r"[_\-]+", " ", self.name)
        return " ".join(p for p in (name, self.description, self.when_to_use) if p)


def skill_define(name: str, **fields: Any) -> Skill:
    """Imperative form of a skill declaration (seed 001 ``skill_define``)."""
    return Skill.from_dict({"name": name, **fields}, where=f"skills.{name}")


class SkillRegistry:
    """Skills by canonical name, in registration order; duplicate names are an error."""

    def __init__(self, skills: Iterable[Skill | Mapping[str, Any]] = ()) -> None:
        self._skills: dict[str, Skill] = {}
        self._index: Any = None
        for item in skills:
            self.register(item)

    def register(self, item: Skill | Mapping[str, Any]) -> Skill:
        skill = item if isinstance(item, Skill) else Skill.from_dict(item)
        key = canonical_name(skill.name)
        if key in self._skills:
            raise AgentOptionError(f"skills.{skill.name}", "registered twice")
        self._skills[key] = skill
        self._index = None
        return skill

    def get(self, name: str) -> Skill | None:
        return self._skills.get(canonical_name(name))

    def names(self) -> list[str]:
        return [s.name for s in self._skills.values()]

    def __iter__(self) -> Any:
        return iter(self._skills.values())

    def __len__(self) -> int:
        return len(self._skills)

    def bm25_scores(self, query: str) -> list[float]:
        """BM25 (bm25s) score of ``query`` against every skill's document."""
        import bm25s

        skills = list(self._skills.values())
        if not skills:
            return []
        if self._index is None:
            corpus = [s.document() for s in skills]
            retriever = bm25s.BM25()
            retriever.index(
                bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False
            )
            self._index = retriever
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)
        words = [w for w in tokens[0] if isinstance(w, str)] if tokens else []
        if not words:
            return [0.0] * len(skills)
        try:
            scores = self._index.get_scores(words)
        except (IndexError, KeyError, ValueError):
            return [0.0] * len(skills)
        return [float(s) for s in scores]


def skill_registry(*skills: Skill | Mapping[str, Any]) -> SkillRegistry:
    return SkillRegistry(skills)


def as_registry(value: Any) -> SkillRegistry:
    """Normalise the ``skills`` option (registry, one skill, or a list)."""
    if isinstance(value, SkillRegistry):
        return value
    if isinstance(value, (Skill, Mapping)):
        return SkillRegistry([value])
    if isinstance(value, (list, tuple)):
        return SkillRegistry(value)
    raise AgentOptionError("skills", "expected a Skill, a SkillRegistry or a list of skills")


@dataclass(frozen=True)
class SkillMatch:
    """``skill_match``: ``strategy`` (metadata | host | embedding), ``top_n``, ``sticky``;
    ``host`` is the host matcher ``(query, skills, working_files) -> [{name, score}]``
    the ``host`` / ``embedding`` strategies call."""

    strategy: str = "metadata"
    top_n: int = 1
    sticky: bool = True
    host: Callable[..., Any] | None = None

    @classmethod
    def parse(cls, value: Any) -> SkillMatch:
        if value is None:
            return cls()
        if not isinstance(value, Mapping):
            raise AgentOptionError("skill_match", "expected a dict {strategy, top_n, sticky}")
        unknown = set(value) - {"strategy", "top_n", "sticky", "host"}
        if unknown:
            raise AgentOptionError(
                f"skill_match.{sorted(unknown)[0]}",
                "unknown field; expected strategy, top_n, sticky, host",
            )
        strategy = value.get("strategy", "metadata")
        if strategy not in ("metadata", "host", "embedding"):
            raise AgentOptionError(
                "skill_match.strategy", f"expected metadata, host or embedding, got {strategy!r}"
            )
        top_n = value.get("top_n", 1)
        if isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 0:
            raise AgentOptionError("skill_match.top_n", f"expected an integer >= 0, got {top_n!r}")
        host = value.get("host")
        if host is not None and not callable(host):
            raise AgentOptionError("skill_match.host", "expected a callable")
        if strategy != "metadata" and host is None:
            raise AgentOptionError(
                "skill_match.host", f"strategy {strategy!r} needs a host matcher callable"
            )
        return cls(str(strategy), top_n, bool(value.get("sticky", True)), host)


#: Score added when the prompt names the skill, and when a working file matches its paths.
NAME_BOOST = 3.0
PATH_BOOST = 2.0


def _path_hit(skill: Skill, files: Sequence[str]) -> str | None:
    flags = wglob.GLOBSTAR | wglob.BRACE | wglob.DOTGLOB
    for path in files:
        if skill.paths and wglob.globmatch(path.lstrip("./") or path, skill.paths, flags=flags):
            return path
    return None


def metadata_scores(
    registry: SkillRegistry, query: str, working_files: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """Every invocable skill with its score and reasons (BM25 + name mention + paths)."""
    out: list[dict[str, Any]] = []
    lowered = query.lower()
    for skill, bm25 in zip(list(registry), registry.bm25_scores(query), strict=True):
        if skill.disable_model_invocation:
            continue
        score, reasons = bm25, ["bm25"] if bm25 > 0 else []
        spoken = re.sub(r"[_\-]+", "[ _-]", re.escape(skill.name.lower()))
        if re.search(rf"(?<![\w]){spoken}(?![\w])", lowered):
            score += NAME_BOOST
            reasons.append("name_mention")
        hit = _path_hit(skill, working_files)
        if hit is not None:
            score += PATH_BOOST
            reasons.append(f"paths:{hit}")
        out.append({"name": skill.name, "score": round(score, 4), "reason": "+".join(reasons)})
    return out


def match_skills(
    registry: SkillRegistry,
    query: str,
    working_files: Sequence[str] = (),
    config: SkillMatch | None = None,
) -> list[dict[str, Any]]:
    """The top ``top_n`` candidates with a positive score, best first."""
    config = config or SkillMatch()
    scored: list[dict[str, Any]] | None = None
    if config.strategy != "metadata" and config.host is not None:
        try:
            raw = config.host(query, list(registry), list(working_files))
            scored = [
                {"name": str(c["name"]), "score": float(c["score"]), "reason": config.strategy}
                for c in raw
                if registry.get(str(c["name"])) is not None
                and not registry.get(str(c["name"])).disable_model_invocation  # type: ignore[union-attr]
            ]
        except Exception as exc:  # the seed: a failing host falls back to metadata scoring
            warnings.warn(
                f"skill_match: host matcher failed ({exc}); using metadata scoring",
                RuntimeWarning,
                stacklevel=2,
            )
    if scored is None:
        scored = metadata_scores(registry, query, working_files)
    order = {name: i for i, name in enumerate(registry.names())}
    ranked = sorted(
        (c for c in scored if c["score"] > 0), key=lambda c: (-c["score"], order[c["name"]])
    )
    return ranked[: config.top_n]


async def _call(hook: Hook | None, skill: Skill) -> None:
    if hook is None:
        return
    params = inspect.signature(hook).parameters
    out = hook(skill) if params else hook()
    if inspect.isawaitable(out):
        await out


class SkillsHook(LoopHook):
    """Owns the active skills of one run: matching, transitions, and the skill frame."""

    def __init__(self, registry: SkillRegistry, config: SkillMatch, files: Sequence[str]) -> None:
        self.registry = registry
        self.config = config
        self.files = list(files)
        self.active: list[Skill] = []
        self.requested: list[tuple[Skill, str]] = []  # model-invoked, applied next turn
        self._frame: contextlib.AbstractContextManager[Any] | None = None
        self._frame_tools: tuple[str, ...] | None = None

    # -- the ``skill`` tool's entry point (may run in another task: only record) ------

    def request(self, skill: Skill, reason: str = "model_invoked") -> None:
        if skill not in self.active and all(s is not skill for s, _ in self.requested):
            self.requested.append((skill, reason))

    # -- extension points ----------------------------------------------------------

    async def on_start(self, run: Any, stack: contextlib.AsyncExitStack) -> None:
        self.run = run
        run.active_skills = self.active
        stack.callback(self._pop_frame)
        if run.cfg.continue_session:
            # the session store (charter.agent.sessions) loaded them before this hook
            for name in run.session.skills if run.session is not None else []:
                skill = self.registry.get(name)
                if skill is not None:
                    await self._activate(skill, 0.0, "session_resume", 0)
            self._sync_frame()

    async def before_model_call(self, run: Any, iteration: int) -> None:
        for skill, reason in self.requested:
            await self._activate(skill, 0.0, reason, iteration)
        self.requested.clear()
        if iteration == 1 or not self.config.sticky:
            await self._match(run, iteration)
        self._sync_frame()

    def on_finish(self, run: Any) -> None:
        run.extras["active_skills"] = [s.name for s in self.active]

    # -- matching and transitions ---------------------------------------------------

    def _query(self, run: Any, iteration: int) -> str:
        """Iteration 1 matches the task; a reassessment matches the latest user message."""
        if iteration > 1:
            for message in reversed(run.messages):
                if message.get("role") == "user" and isinstance(message.get("content"), str):
                    return str(message["content"])
        return str(run.prompt)

    async def _match(self, run: Any, iteration: int) -> None:
        if self.config.top_n == 0:
            picked: list[dict[str, Any]] = []
        else:
            picked = match_skills(
                self.registry, self._query(run, iteration), self.files, self.config
            )
        run.event(
            "skill_matched",
            iteration=iteration,
            strategy=self.config.strategy,
            candidates=picked,
        )
        chosen: list[Skill] = []
        for candidate in picked:
            skill = self.registry.get(candidate["name"])
            if skill is not None and await self._activate(
                skill, candidate["score"], candidate["reason"], iteration
            ):
                chosen.append(skill)
        if not self.config.sticky and chosen:
            # a pass that picks a different top-N replaces the active set; a pass with
            # no candidate (a nudge, a tool result) keeps it
            for skill in [s for s in self.active if s not in chosen]:
                await self._deactivate(skill, iteration, "reassess")

    async def _activate(self, skill: Skill, score: float, reason: str, iteration: int) -> bool:
        if skill in self.active:
            return True
        decision = decide_current_resource("skills", skill.name)
        if not decision.allowed:
            self.run.event(
                "skill_denied", iteration=iteration, skill=skill.name, decision=decision.to_dict()
            )
            return False
        await _call(skill.on_activate, skill)
        self.active.append(skill)
        self.run.event(
            "skill_activated", iteration=iteration, skill=skill.name, score=score, reason=reason
        )
        if skill.allowed_tools is not None:
            self.run.event(
                "skill_scope_tools",
                iteration=iteration,
                skill=skill.name,
                allowed_tools=list(skill.allowed_tools),
            )
        return True

    async def _deactivate(self, skill: Skill, iteration: int, reason: str) -> None:
        await _call(skill.on_deactivate, skill)
        self.active.remove(skill)
        self.run.event("skill_deactivated", iteration=iteration, skill=skill.name, reason=reason)

    # -- the frame ------------------------------------------------------------------

    def allowed_tools(self) -> tuple[str, ...] | None:
        """The union of the active skills' ``allowed_tools`` (``None``: no narrowing)."""
        scoped = [s for s in self.active if s.allowed_tools is not None]
        if not scoped:
            return None
        names = [t for s in scoped for t in (s.allowed_tools or ())]
        return tuple(dict.fromkeys([*names, *RUNTIME_TOOLS]))

    def _sync_frame(self) -> None:
        tools = self.allowed_tools()
        if tools == self._frame_tools:
            return
        self._pop_frame()
        if tools is not None:
            names = ",".join(s.name for s in self.active if s.allowed_tools is not None)
            policy = Policy(tools=Rules((tools,)), name=f"skill:{names}")
            frame = with_execution_policy(policy, label=f"skill:{names}", kind="skill")
            frame.__enter__()
            self._frame = frame
        self._frame_tools = tools

    def _pop_frame(self) -> None:
        if self._frame is not None:
            frame, self._frame = self._frame, None
            frame.__exit__(None, None, None)
        self._frame_tools = None


def skills_hook(options: Mapping[str, Any]) -> SkillsHook | None:
    """The hook for the ``skills`` / ``skill_match`` / ``working_files`` options."""
    if not options.get("skills"):
        for key in ("skill_match", "working_files"):
            if options.get(key) is not None:
                raise AgentOptionError(key, "given without skills")
        return None
    files = _strings("working_files", options.get("working_files"))
    return SkillsHook(
        as_registry(options["skills"]), SkillMatch.parse(options.get("skill_match")), files
    )
