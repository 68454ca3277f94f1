"""``@persona`` / ``@step``: stage policies for Python workflows (seed 000).

Entering a ``@step`` whose name matches a stage of the enclosing ``@persona`` pushes
that stage's policy (kind ``"stage"``) with :func:`charter.policy.with_execution_policy`;
leaving the step pops it on success, error or early exit. Each stage records a receipt
with its ``on_exit`` hints; the runtime does not route on them, the workflow does.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from charter.policy import Policy, SideEffectLevel, scoped_policy, with_execution_policy

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Stage:
    """One declared stage. ``allowed_tools=None`` inherits; ``[]`` denies every tool."""

    name: str
    allowed_tools: tuple[str, ...] | None = None
    side_effect_level: str | None = None
    max_iterations: int | None = None
    on_exit: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, value: Stage | Mapping[str, Any]) -> Stage:
        if isinstance(value, Stage):
            return value
        data = dict(value)
        unknown = set(data) - {
            "name",
            "allowed_tools",
            "side_effect_level",
            "max_iterations",
            "on_exit",
        }
        if unknown:
            raise ValueError(f"stage: unknown field(s) {', '.join(sorted(unknown))}")
        if not data.get("name"):
            raise ValueError("stage: 'name' is required")
        level = data.get("side_effect_level")
        if level is not None:
            SideEffectLevel.parse(level)
        tools = data.get("allowed_tools")
        return cls(
            name=str(data["name"]),
            allowed_tools=None if tools is None else tuple(tools),
            side_effect_level=level,
            max_iterations=data.get("max_iterations"),
            on_exit=dict(data.get("on_exit") or {}),
        )

    def policy(self) -> Policy:
        return scoped_policy(
            None, allowed_tools=self.allowed_tools, side_effect_level=self.side_effect_level
        )


@dataclass
class PersonaRun:
    """One invocation of a ``@persona`` workflow: its stages and the stage receipts."""

    persona: str
    stages: dict[str, Stage]
    receipts: list[dict[str, Any]] = field(default_factory=list)


_RUN: ContextVar[PersonaRun | None] = ContextVar("charter_persona_run", default=None)


def current_persona_run() -> PersonaRun | None:
    return _RUN.get()


def _validate(name: str, tools: Sequence[str] | None, stages: list[Stage]) -> None:
    seen: set[str] = set()
    for stage in stages:
        if stage.name in seen:
            raise ValueError(f"persona {name!r}: two stages are named {stage.name!r}")
        seen.add(stage.name)
    for stage in stages:
        if tools is not None and stage.allowed_tools:
            extra = [t for t in stage.allowed_tools if t not in tools]
            if extra:
                raise ValueError(
                    f"persona {name!r}: stage {stage.name!r} allows tools not in the persona's "
                    f"tools: {', '.join(extra)}"
                )
        for key in ("on_complete", "on_failure"):
            target = stage.on_exit.get(key)
            if target is not None and target not in seen:
                raise ValueError(
                    f"persona {name!r}: stage {stage.name!r} on_exit.{key} names unknown "
                    f"stage {target!r}"
                )


def persona(
    name: str,
    tools: Sequence[str] | None = None,
    stages: Sequence[Stage | Mapping[str, Any]] = (),
    *,
    policy: Policy | Mapping[str, Any] | None = None,
) -> Callable[[F], F]:
    """Declare a persona workflow: its tools (a persona frame) and its stages."""
    parsed = [Stage.parse(s) for s in stages]
    _validate(name, tools, parsed)
    frame_policy = scoped_policy(policy, allowed_tools=list(tools) if tools is not None else None)

    def decorate(func: F) -> F:
        @contextlib.contextmanager
        def entered() -> Iterator[PersonaRun]:
            run = PersonaRun(name, {s.name: s for s in parsed})
            token = _RUN.set(run)
            try:
                with with_execution_policy(frame_policy, label=f"persona:{name}", kind="persona"):
                    yield run
            finally:
                _RUN.reset(token)
                wrapper.last_run = run  # type: ignore[attr-defined]

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def wrapper(*args: Any, **kwargs: Any) -> Any:
                with entered():
                    return await func(*args, **kwargs)
        else:

            @functools.wraps(func)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                with entered():
                    return func(*args, **kwargs)

        wrapper.persona_name = name  # type: ignore[attr-defined]
        wrapper.stages = parsed  # type: ignore[attr-defined]
        wrapper.last_run = None  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate


@contextlib.contextmanager
def persona_stages(
    name: str, stages: Sequence[Stage | Mapping[str, Any]] = ()
) -> Iterator[PersonaRun]:
    """Apply ``stages`` to ``@step`` s run in the block, without pushing a persona frame.

    For hosts (``charter.run``) that push the persona's own frame themselves, or adopt a
    handoff's ``policy_override`` in its place.
    """
    parsed = [Stage.parse(s) for s in stages]
    _validate(name, None, parsed)
    run = PersonaRun(name, {s.name: s for s in parsed})
    token = _RUN.set(run)
    try:
        yield run
    finally:
        _RUN.reset(token)


@contextlib.contextmanager
def _stage(name: str) -> Iterator[None]:
    run = _RUN.get()
    stage = run.stages.get(name) if run is not None else None
    if run is None or stage is None:
        yield
        return
    receipt: dict[str, Any] = {
        "stage": name,
        "persona": run.persona,
        "allowed_tools": None if stage.allowed_tools is None else list(stage.allowed_tools),
        "side_effect_level": stage.side_effect_level,
        "on_exit": dict(stage.on_exit),
        "entered_at": time.time(),
    }
    run.receipts.append(receipt)
    outcome = "complete"
    try:
        with with_execution_policy(stage.policy(), label=f"stage:{name}", kind="stage", stage=name):
            yield
    except BaseException as exc:
        outcome = "failure"
        receipt["error"] = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        receipt["outcome"] = outcome
        receipt["exited_at"] = time.time()
        hint_key = "on_complete" if outcome == "complete" else "on_failure"
        receipt["next_stage_hint"] = stage.on_exit.get(hint_key)


def step(name: str) -> Callable[[F], F]:
    """Mark a workflow step; a matching persona stage is in force while it runs."""

    def decorate(func: F) -> F:
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def awrapper(*args: Any, **kwargs: Any) -> Any:
                with _stage(name):
                    return await func(*args, **kwargs)

            awrapper.step_name = name  # type: ignore[attr-defined]
            return awrapper  # type: ignore[return-value]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with _stage(name):
                return func(*args, **kwargs)

        wrapper.step_name = name  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate
