"""``prompts`` / ``prompt_overrides``: replace the loop's own prompts by logical id.

Ids (anything else is refused, with the closest id suggested):

- ``agent.loop_contract``: the system-prompt line telling a loop-until-done model how to
  finish (context: ``fmt``, ``sentinel``);
- ``agent.tool_contract_text``: the text-mode tool contract (``<tool_call>`` tags; context:
  ``tools``, ``sentinel``);
- ``agent.completion_judge_system``: the completion judges' system prompt, where the
  judge's own ``system`` is not given;
- ``agent.nudge``: the message after a text-only turn (context: ``fmt``, ``sentinel``),
  where the ``nudge`` option is not given.

A value is a prompt asset path (a string), ``{"text": ...}``, ``{"path": ...}`` or a
render callable ``context -> str`` (the context holds ``default``, the built-in text).
Paths are read when the options are checked, so a missing file fails before any model
call, naming the id and the file.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .options import AgentOptionError

PROMPT_IDS = (
    "agent.loop_contract",
    "agent.tool_contract_text",
    "agent.completion_judge_system",
    "agent.nudge",
)


class PromptOverrides:
    """The overrides of one loop (an empty one renders every default unchanged)."""

    def __init__(self, overrides: Mapping[str, str | Callable[[dict[str, Any]], Any]]):
        self.overrides = dict(overrides)

    def __bool__(self) -> bool:
        return bool(self.overrides)

    def has(self, prompt_id: str) -> bool:
        return prompt_id in self.overrides

    def render(self, prompt_id: str, default: str, **context: Any) -> str:
        value = self.overrides.get(prompt_id)
        if value is None:
            return default
        if callable(value):
            return str(value({"id": prompt_id, "default": default, **context}))
        return value


def parse_prompts(options: Mapping[str, Any]) -> PromptOverrides:
    """``prompts`` and its alias ``prompt_overrides`` (not both)."""
    given = [k for k in ("prompts", "prompt_overrides") if options.get(k) is not None]
    if len(given) == 2:
        raise AgentOptionError("prompt_overrides", "give prompts or prompt_overrides, not both")
    if not given:
        return PromptOverrides({})
    key = given[0]
    spec = options[key]
    if not isinstance(spec, Mapping):
        raise AgentOptionError(key, f"expected a dict of prompt id -> override ({PROMPT_IDS})")
    out: dict[str, Any] = {}
    for prompt_id, value in spec.items():
        if prompt_id not in PROMPT_IDS:
            close = difflib.get_close_matches(str(prompt_id), PROMPT_IDS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise AgentOptionError(
                f"{key}.{prompt_id}",
                f"unknown prompt id (expected one of {', '.join(PROMPT_IDS)}){hint}",
            )
        out[prompt_id] = _value(f"{key}.{prompt_id}", value)
    return PromptOverrides(out)


def _value(where: str, value: Any) -> str | Callable[[dict[str, Any]], Any]:
    if callable(value):
        return value  # type: ignore[no-any-return]
    if isinstance(value, str):
        return _read(where, value)
    if isinstance(value, Mapping) and set(value) == {"text"} and isinstance(value["text"], str):
        return value["text"]
    if isinstance(value, Mapping) and set(value) == {"path"} and isinstance(value["path"], str):
        return _read(where, value["path"])
    raise AgentOptionError(
        where, "expected a prompt asset path, {text: ...}, {path: ...} or a render callable"
    )


def _read(where: str, path: str) -> str:
    try:
        return Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise AgentOptionError(where, f"{path}: cannot read ({exc.strerror})") from None
