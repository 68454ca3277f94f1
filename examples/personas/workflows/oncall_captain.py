"""Entry workflow of the oncall_captain persona (examples/personas/charter.toml).

Incident triage in the persona's two stages: ``gather`` (read-only) has the model read
the alert, the runbook and the service's recent logs and draft a timeline with the
likely cause; ``notify`` acknowledges the incident in PagerDuty and posts the draft to
the incident channel (PagerDuty's REST API: acknowledge, then the draft as a note; Slack's
chat.postMessage). All are network side effects, so the autonomy tier decides what
happens: executed (``act_auto``), waiting for ``charter approve`` (``act_with_approval``,
the pack's tier), a proposal (``suggest``) or a dry run (``shadow``). Whatever the tier
did, the incident is then handed to the people on call (``human:oncall``) with the draft
and what was done, through the ``incident-page`` route.
"""

from __future__ import annotations

from typing import Any

from charter.agent import step


def run(ctx: Any) -> dict[str, Any]:
    """Called by ``charter persona run`` with a :class:`charter.run.RunContext`."""
    if ctx is None:  # smoke check of the template pack: nothing to act on
        return {"persona": "oncall_captain", "dry_run": True, "status": "ok"}
    tools = _load_tools()
    tools.register_oncall(ctx)
    meta = ctx.trigger.metadata
    incident = str(meta.get("incident") or meta.get("id") or "unknown")
    service = str(meta.get("service") or "unknown")
    draft = gather(ctx, incident, service)
    actions = notify(ctx, incident, service, draft)
    ctx.handoff(
        "incident_page",
        {"incident": incident, "service": service, "draft": draft, "actions": actions},
        summary=f"{service}: incident {incident} needs a human ({_summary(actions)})",
    )
    return {
        "persona": "oncall_captain",
        "incident": incident,
        "service": service,
        "tier": ctx.tier,
        "draft": draft,
        "actions": actions,
        "status": "ok",
    }


@step("gather")
def gather(ctx: Any, incident: str, service: str) -> str:
    result = ctx.agent(
        f"PagerDuty incident {incident} fired for the {service} service. Read the on-call "
        "runbook and the service's recent logs (fixtures/logs/), then draft a short "
        "timeline and the most likely cause. Do not act: only read.",
        tools=["read", "grep"],
    )
    return str(result.visible_text)


@step("notify")
def notify(ctx: Any, incident: str, service: str, draft: str) -> dict[str, str]:
    ack = ctx.call_tool("pagerduty_acknowledge", incident=incident)
    note = ctx.call_tool("pagerduty_add_note", incident=incident, content=draft[:5000])
    post = ctx.call_tool(
        "slack_post_message", channel="#incidents", text=f"{service} / {incident}: {draft}"
    )
    return {"acknowledge": _status(ack), "note": _status(note), "slack": _status(post)}


def _status(observation: Any) -> str:
    if isinstance(observation, dict):
        return str(observation.get("status") or "ok")
    return "ok"


def _summary(actions: dict[str, str]) -> str:
    return ", ".join(f"{name} {status}" for name, status in actions.items())


def _load_tools() -> Any:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).with_name("_tools.py")
    spec = importlib.util.spec_from_file_location("charter_pack_tools", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
