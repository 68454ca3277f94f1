"""``scratchpad``: session-local working memory recited at the prompt tail (seed 001).

``scratchpad=True`` starts ``{goals, open_items, facts, refs}``, renders it as a tail
system fragment every turn and reorganizes it every ``reorganize_every`` continuing turns
with a structured model call (``reorganizer`` may name another provider/model).
Reorganization is validated: the reply must be the pad's JSON shape, and every fact must
cite refs already in the pad or in the recent turns (tool call ids, ``msg:N``), so heavy
tool output stays referenced instead of copied; facts citing unknown refs are dropped. The
pad is capped at 16 KiB and lives in the session store, not in the transcript: updates
append ``agent_scratchpad`` events with action, version and count.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .hooks import LoopHook
from .options import AgentOptionError
from .providers import LlmRequest, get_provider
from .sessions import SCRATCHPAD_MAX_BYTES

KEYS = ("goals", "open_items", "facts", "refs")
_CONFIG_KEYS = (
    "enabled",
    "recite",
    "reorganize_every",
    "max_recent_messages",
    "schema_retries",
    "initial",
    "reorganizer",
)
REORGANIZE_SYSTEM = (
    "You maintain an agent's scratchpad. Reply with one JSON object only, with keys "
    '"goals" (list of strings), "open_items" (list of strings), "facts" (list of '
    '{"text": string, "refs": [string]}) and "refs" (list of strings). Every fact must cite '
    "refs that appear in the current scratchpad or in the recent turns (tool call ids or "
    "msg:N). Keep it short; drop what is done or stale."
)


def empty_pad() -> dict[str, Any]:
    return {key: [] for key in KEYS}


def _size(pad: Mapping[str, Any]) -> int:
    return len(json.dumps(pad, default=str, ensure_ascii=False).encode("utf-8"))


class ScratchpadHook(LoopHook):
    """Keeps, recites and reorganizes one session's scratchpad."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        unknown = set(spec) - set(_CONFIG_KEYS)
        if unknown:
            raise AgentOptionError("scratchpad", f"unknown key(s) {', '.join(sorted(unknown))}")
        self.recite = bool(spec.get("recite", True))
        self.every = int(spec.get("reorganize_every", 3))
        self.recent = int(spec.get("max_recent_messages", 6))
        self.retries = int(spec.get("schema_retries", 1))
        if self.every < 0 or self.recent < 1 or self.retries < 0:
            raise AgentOptionError(
                "scratchpad", "reorganize_every >= 0, max_recent_messages >= 1, schema_retries >= 0"
            )
        initial = spec.get("initial")
        if initial is not None and (not isinstance(initial, Mapping) or set(initial) - set(KEYS)):
            raise AgentOptionError("scratchpad.initial", f"expected a dict with {', '.join(KEYS)}")
        self.initial = {**empty_pad(), **dict(initial or {})}
        reorganizer = spec.get("reorganizer") or {}
        if not isinstance(reorganizer, Mapping) or set(reorganizer) - {"provider", "model"}:
            raise AgentOptionError("scratchpad.reorganizer", "expected {provider?, model?}")
        self.reorganizer = dict(reorganizer)
        self.pad: dict[str, Any] = dict(self.initial)
        self.version = 0
        self.run: Any = None

    async def on_start(self, run: Any, stack: Any) -> None:
        self.run = run
        run.scratchpad_refs = self.refs
        session = run.session
        if session is not None and session.scratchpad is not None:
            self.pad = {**empty_pad(), **session.scratchpad}
            self.version = session.scratchpad_version
        else:
            self._save("init")

    def _save(self, action: str, dropped: int = 0) -> None:
        self.version += 1
        store = getattr(self.run, "session_store", None)
        if store is not None:
            store.append(
                self.run.cfg.session_id,
                [
                    {
                        "type": "scratchpad",
                        "pad": self.pad,
                        "version": self.version,
                        "action": action,
                    }
                ],
            )
        self.run.event(
            "agent_scratchpad",
            action=action,
            version=self.version,
            count=len(self.pad.get("facts", [])),
            dropped_facts=dropped,
        )

    def refs(self) -> set[str]:
        """Every ref the pad cites (``reachability_gc`` keeps those tool results)."""
        return self.known_refs([])

    def known_refs(self, recent: list[tuple[int, dict[str, Any]]]) -> set[str]:
        refs = {str(r) for r in self.pad.get("refs", [])}
        for fact in self.pad.get("facts", []):
            if isinstance(fact, Mapping):
                refs.update(str(r) for r in fact.get("refs", []))
        for index, message in recent:
            refs.add(f"msg:{index}")
            if message.get("tool_call_id"):
                refs.add(str(message["tool_call_id"]))
            for call in message.get("tool_calls") or []:
                refs.add(str(call.get("id")))
        return refs

    def validate(self, text: str, known: set[str]) -> tuple[dict[str, Any], int]:
        data = json.loads(text[text.find("{") : text.rfind("}") + 1] if "{" in text else text)
        if not isinstance(data, dict) or set(data) - set(KEYS):
            raise ValueError(f"expected an object with keys {', '.join(KEYS)}")
        pad = {**empty_pad(), **data}
        for key in ("goals", "open_items", "refs"):
            if not isinstance(pad[key], list) or not all(isinstance(v, str) for v in pad[key]):
                raise ValueError(f"{key}: expected a list of strings")
        kept, dropped = [], 0
        for fact in pad["facts"]:
            if not isinstance(fact, Mapping) or not isinstance(fact.get("text"), str):
                raise ValueError("facts: expected {text, refs} objects")
            refs = [str(r) for r in fact.get("refs") or []]
            if refs and all(r in known for r in refs):
                kept.append({"text": fact["text"], "refs": refs})
            else:
                dropped += 1  # a fact must cite evidence the pad or recent turns hold
        pad["facts"] = kept
        pad["refs"] = [r for r in pad["refs"] if r in known]
        if _size(pad) > SCRATCHPAD_MAX_BYTES:
            raise ValueError(f"the reorganized pad exceeds {SCRATCHPAD_MAX_BYTES} bytes")
        return pad, dropped

    async def reorganize(self, iteration: int) -> None:
        run = self.run
        messages = run.messages
        start = max(0, len(messages) - self.recent)
        recent = list(enumerate(messages[start:], start))
        known = self.known_refs(recent)
        lines = []
        for index, m in recent:
            body = str(m.get("content") or "")[:1500]
            ref = m.get("tool_call_id") or f"msg:{index}"
            lines.append(f"[{ref}] {m.get('role')}: {body}")
        spec = self.reorganizer.get("provider")
        provider = get_provider(spec) if spec is not None else run.aux_provider
        prompt = (
            f"Current scratchpad:\n{json.dumps(self.pad, ensure_ascii=False)}\n\n"
            "Recent turns:\n" + "\n".join(lines)
        )
        error = ""
        for _ in range(self.retries + 1):
            request = LlmRequest(
                model=self.reorganizer.get("model") or run.cfg.model,
                system=REORGANIZE_SYSTEM,
                messages=[{"role": "user", "content": prompt + error}],
                purpose="scratchpad",
            )
            response = await provider.complete(request)
            run.stats.input_tokens += response.input_tokens
            run.stats.output_tokens += response.output_tokens
            try:
                pad, dropped = self.validate(response.text or "", known)
            except (ValueError, TypeError) as exc:
                error = f"\n\nYour last reply was rejected: {exc}. Reply with the JSON only."
                continue
            self.pad = pad
            self._save("reorganize", dropped)
            return
        run.event("agent_scratchpad", action="rejected", version=self.version, error=error.strip())

    async def before_model_call(self, run: Any, iteration: int) -> None:
        if self.every and iteration > 1 and (iteration - 1) % self.every == 0:
            await self.reorganize(iteration)
        if self.recite:
            run.system_tail["scratchpad"] = (
                f'<scratchpad version="{self.version}">\n'
                f"{json.dumps(self.pad, ensure_ascii=False, indent=1)}\n</scratchpad>"
            )

    def on_finish(self, run: Any) -> None:
        run.transcript_extra["scratchpad"] = self.pad
        run.transcript_extra["scratchpad_version"] = self.version
        run.transcript_extra.setdefault("metadata", {})["agent_scratchpad"] = {
            "version": self.version,
            "facts": len(self.pad.get("facts", [])),
            "bytes": _size(self.pad),
        }


def scratchpad_hook(spec: Any) -> ScratchpadHook | None:
    if spec is None or spec is False:
        return None
    if spec is True:
        return ScratchpadHook({})
    if isinstance(spec, Mapping):
        if not spec.get("enabled", True):
            return None
        return ScratchpadHook({k: v for k, v in spec.items() if k != "enabled"})
    raise AgentOptionError("scratchpad", "expected true/false or a dict")
