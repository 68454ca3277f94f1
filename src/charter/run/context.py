"""``RunContext``: what a persona's entry workflow receives.

```python
def run(ctx: RunContext) -> dict:
    ctx.trigger            # the envelope: source, work_key, provider, kind, metadata, payload
    ctx.context_packs      # {"repo_policy": "...", ...}
    ctx.tier               # the autonomy tier this run acts in (shadow, suggest, ...)
    ctx.call_tool("read", file_path="README.md")          # enforced like a model's call
    result = ctx.agent("Review this PR", tools=["read", "github"])   # the agent loop
    ctx.handoff("merge_receipt", {"pr": 462}, summary="merged")       # routed at run end
    return {"status": "ok"}
```

Every tool call, from the workflow or from the model, is decided by the policy stack
(persona frame, stage frames, a handoff's override) and then by the autonomy gate.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from charter.agent import (
    AgentResult,
    Dispatcher,
    MockProvider,
    Provider,
    Tool,
    ToolCallRequest,
    agent_loop_async,
)
from charter.manifest import Persona
from charter.policy import make_context
from charter.runtime import format_time

from . import transcripts
from .autonomy import AutonomyGate, current_stage
from .control import HandoffIntent, RunControl
from .errors import ModelProviderFailed, RunStopped
from .events import RunKind
from .models import ModelRouter
from .tiers import SHADOW, SUGGEST


@dataclass(frozen=True)
class TriggerEnvelope:
    """Why the run woke: ``source`` is trigger, schedule, manual, handoff or queue."""

    source: str
    work_key: str
    at: str
    provider: str | None = None
    kind: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    payload: Mapping[str, Any] | None = None
    handoff: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "work_key": self.work_key,
            "at": self.at,
            "provider": self.provider,
            "kind": self.kind,
            "metadata": dict(self.metadata),
            "payload": dict(self.payload) if self.payload is not None else None,
            "handoff": dict(self.handoff) if self.handoff is not None else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TriggerEnvelope:
        """The inverse of :meth:`to_dict` (a parked run's stored trigger)."""
        return cls(
            str(data["source"]),
            str(data["work_key"]),
            str(data["at"]),
            data.get("provider"),
            data.get("kind"),
            dict(data.get("metadata") or {}),
            data.get("payload"),
            data.get("handoff"),
        )


class RunContext:
    """The run as the workflow sees it."""

    def __init__(
        self,
        *,
        persona: Persona,
        run_id: str,
        trigger: TriggerEnvelope,
        tier: str,
        context_packs: Mapping[str, str],
        workspace: Path,
        pack_dir: Path,
        control: RunControl,
        gate: AutonomyGate,
        router: ModelRouter,
        provider_spec: str | Provider,
        tools: Sequence[Tool] = (),
        daemon_dir: Path | None = None,
    ) -> None:
        self.persona = persona
        self.name = persona.name
        self.run_id = run_id
        self.trigger = trigger
        self.input = trigger.to_dict()
        self.tier = tier
        self.context_packs = dict(context_packs)
        self.workspace = workspace
        self.pack_dir = pack_dir
        self.model_policy = persona.model_policy
        self.tools: dict[str, Tool] = {}
        self.daemon_events: list[dict[str, Any]] = []
        self._control = control
        self._gate = gate
        self._router = router
        self._provider_spec = provider_spec
        self._context = make_context(str(workspace))
        self._daemon_dir = daemon_dir or pack_dir / ".charter" / "daemons"
        for tool in tools:
            self.register_tool(tool)

    # -- facts -------------------------------------------------------------

    @property
    def dry_run(self) -> bool:
        """True when side effects will not execute (``shadow`` / ``suggest``)."""
        return self.tier in (SHADOW, SUGGEST)

    @property
    def handoff_item(self) -> Mapping[str, Any] | None:
        """The inbox handoff this run was started for, if any."""
        return self.trigger.handoff

    @property
    def instructions(self) -> str:
        """The persona folder's AGENTS.md text (or the description)."""
        ins = self.persona.instructions
        if ins is not None:
            try:
                return Path(ins.agents_md).read_text(encoding="utf-8")
            except OSError:
                pass
        return self.persona.description

    @property
    def proposals(self) -> list[dict[str, Any]]:
        return list(self._control.proposals)

    @property
    def receipts(self) -> list[dict[str, Any]]:
        return list(self._control.receipts.receipts)

    def system_prompt(self) -> str:
        """Instructions + context packs, the default system prompt of :meth:`agent`."""
        parts = [self.instructions.strip()]
        for name, text in self.context_packs.items():
            parts.append(f"<context_pack name={name!r}>\n{text.strip()}\n</context_pack>")
        return "\n\n".join(p for p in parts if p)

    # -- daemons -----------------------------------------------------------

    def daemon_path(self, name: str) -> Path:
        """Where this persona's daemon ``name`` keeps its queue and snapshot (its
        ``persist_path``: ``<state dir>/daemons/<persona>/<name>``)."""
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"daemon name {name!r}: expected a plain name")
        return self._daemon_dir / self.name / name

    def daemon_trigger(self, name: str, event: Mapping[str, Any] | None = None) -> str:
        """Wake this persona's daemon ``name`` with ``event`` (default: this run's trigger);
        durable, so a daemon that is down sees it when it resumes. Returns the event id."""
        from charter.agent.daemon import trigger_path

        body = dict(event) if event is not None else {"trigger": self.input}
        event_id = trigger_path(self.daemon_path(name), {"run_id": self.run_id, **body})
        self.daemon_events.append({"daemon": name, "event_id": event_id})
        return event_id

    # -- tools -------------------------------------------------------------

    def register_tool(self, tool: Tool) -> Tool:
        self.tools[tool.name] = tool
        if tool.preview is not None:
            self._gate.previews[tool.name] = tool.preview
        else:
            self._gate.previews.pop(tool.name, None)
        return tool

    def register_tools(self, tools: Sequence[Tool]) -> list[Tool]:
        """:meth:`register_tool` for each (e.g. :func:`charter.tools.github_tools`)."""
        return [self.register_tool(t) for t in tools]

    def _resolve(self, tools: Sequence[str | Tool] | None) -> list[Tool]:
        if tools is None:
            return list(self.tools.values())
        out: list[Tool] = []
        for item in tools:
            if isinstance(item, Tool):
                out.append(item)
            elif item in self.tools:
                out.append(self.tools[item])
            else:
                raise KeyError(
                    f"unknown tool {item!r}; registered: {', '.join(sorted(self.tools))}"
                )
        return out

    async def call_tool_async(self, name: str, /, **arguments: Any) -> Any:
        """Call a registered tool exactly as a model's call is dispatched (policy, then tier)."""
        self._check_stop()
        dispatcher = Dispatcher(
            list(self.tools.values()), context=self._context, tool_caller=self._gate.middleware
        )
        request = ToolCallRequest(f"workflow_{self._control.calls + 1}", name, arguments)
        outcome = await dispatcher.dispatch_one(request)
        if outcome.status in ("permission_denied", "scope_violation"):
            self._record_denied(outcome.to_dict(), outcome.observation)
        self._check_stop()
        return outcome.observation

    def call_tool(self, name: str, /, **arguments: Any) -> Any:
        return asyncio.run(self.call_tool_async(name, **arguments))

    # -- the agent loop ----------------------------------------------------

    def _provider(self, mock: Any) -> Provider:
        if self._provider_spec == "mock" and mock is not None:
            if isinstance(mock, str | Path):
                path = Path(mock)
                if not path.is_absolute():
                    path = self.pack_dir / path
                return MockProvider.from_file(path)
            return MockProvider(list(mock))
        return self._router.provider

    async def agent_async(
        self,
        prompt: str,
        *,
        system: str | None = None,
        tools: Sequence[str | Tool] | None = None,
        escalate: bool = False,
        why: str | None = None,
        mock: Any = None,
        **options: Any,
    ) -> AgentResult:
        """Run the agent loop with this run's model, budget, policy stack and tier.

        ``escalate`` asks for the escalation model (counted against
        ``frontier_escalations``). Raises :class:`ModelProviderFailed` when the provider
        failed after retries and fallbacks, so such a run ends ``failed`` with the
        provider's error as ``last_error`` unless the workflow catches it. ``mock`` is a
        script (path relative to the pack, or a list of turns) used only when the run's
        provider is a bare ``mock``.
        """
        self._check_stop()
        provider = self._provider(mock)
        model = self._router.choose(escalate, why=why)
        self._check_stop()
        opts: dict[str, Any] = {
            "provider": provider,
            "model": model,
            "tools": self._resolve(tools),
            "tool_caller": self._gate.middleware,
            "llm_caller": self._router.caller(provider),
            "workspace": str(self.workspace),
            # model_policy.reasoning_effort, as the loop's reasoning_policy; the
            # workflow's own options below override it
            **self.model_policy.agent_options(),
        }
        opts.update(options)
        result = await agent_loop_async(
            prompt, system if system is not None else self.system_prompt(), **opts
        )
        self._control.transcripts.append(
            transcripts.entry(result.transcript, status=result.status, model=model)
        )
        for event in result.trace.get("events", []):
            if event.get("type") == "tool_call_audit" and event.get("status") in (
                "permission_denied",
                "scope_violation",
            ):
                self._record_denied(event, None)
        self._check_stop()
        if result.status == "provider_error":
            raise ModelProviderFailed(result)
        return result

    def agent(self, prompt: str, **options: Any) -> AgentResult:
        return asyncio.run(self.agent_async(prompt, **options))

    # -- handoffs ----------------------------------------------------------

    def handoff(
        self,
        kind: str,
        payload: Mapping[str, Any] | None = None,
        *,
        summary: str | None = None,
        policy_override: Mapping[str, Any] | None = None,
        facts: Mapping[str, bool] | None = None,
    ) -> int:
        """Ask for a handoff; it is routed by ``[[handoff_routes]]`` when the run ends.

        Routing then sees ``budget_exhausted`` / ``approval_denied`` from this run, and
        ``facts`` answer custom predicates (``{"blocking_findings": True}``).
        """
        self._control.handoffs.append(
            HandoffIntent(
                kind,
                dict(payload or {}),
                summary,
                dict(policy_override) if policy_override is not None else None,
                {k: bool(v) for k, v in (facts or {}).items()},
            )
        )
        return len(self._control.handoffs) - 1

    # -- internals ---------------------------------------------------------

    def _record_denied(self, outcome: Mapping[str, Any], observation: Any) -> None:
        control = self._control
        call_id = control.next_call_id()
        receipt = observation
        if receipt is None:
            import json

            try:
                receipt = json.loads(str(outcome.get("rendered_result") or "null"))
            except ValueError:
                receipt = outcome.get("rendered_result")
        at = format_time(control.receipts.clock())  # decided at once: start = end
        record = {
            "call_id": call_id,
            "tool": outcome.get("tool_name"),
            "arguments": outcome.get("arguments") or {},
            "status": outcome.get("status"),
            "decision": outcome.get("decision"),
            "receipt": receipt,
        }
        entry = control.receipts.receipt(RunKind.TOOL_DENIED, record)
        record["receipt_id"] = entry["receipt_id"] if entry else None
        control.denied.append(record)
        control.tool_calls.append(
            {**record, "executed": False, "stage": current_stage(), "started_at": at,
             "ended_at": at}
        )  # fmt: skip

    def _check_stop(self) -> None:
        control = self._control
        control.confirm_lease()
        if control.stop is not None:
            raise RunStopped("budget_exhausted", control.stop.to_payload())
        if control.fatal is not None:
            raise RunStopped("failed", {"message": control.fatal})


__all__ = ["RunContext", "TriggerEnvelope"]
