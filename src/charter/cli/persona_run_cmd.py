"""``charter persona run NAME``: wake a persona and run its entry workflow under its charter.

Thin: arguments are parsed here; admission, enforcement, receipts and budgets live in
:mod:`charter.run`. :func:`register` attaches the command to the ``persona`` group.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ._common import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    check_llm,
    emit_json,
    fail,
    llm_from_env,
    read_json_object,
)

TIER_CHOICES = ("shadow", "suggest", "act_with_approval", "act_auto")


_fail = fail


def _manifest(ctx: click.Context, given: Path | None) -> Path | None:
    if given is not None:
        return given
    from charter.cli.persona_cmd import selected_manifest

    chosen = selected_manifest(ctx)
    return Path(chosen) if chosen else None


def load_trigger_file(
    path: Path, provider: str | None
) -> tuple[str | None, str | None, dict[str, str], dict[str, Any] | None]:
    """``--payload``: a trigger envelope ``{provider, kind, metadata, payload?}`` or a whole
    webhook body (then ``--provider`` names its source)."""
    data = read_json_object(path, "--payload")
    if isinstance(data.get("provider"), str) and (
        "metadata" in data or "kind" in data or "payload" in data
    ):
        meta = data.get("metadata") or {}
        if not isinstance(meta, dict):
            _fail("--payload: 'metadata' must be an object", EXIT_BAD_INPUT)
        body = data.get("payload")
        if body is not None and not isinstance(body, dict):
            _fail("--payload: 'payload' must be an object", EXIT_BAD_INPUT)
        kind = data.get("kind")
        return (
            provider or str(data["provider"]),
            str(kind) if kind is not None else None,
            {str(k): str(v) for k, v in meta.items()},
            body,
        )
    if provider is None:
        _fail("--payload with a webhook body needs --provider", EXIT_BAD_INPUT)
    return provider, None, {}, data


def _line(label: str, text: str) -> None:
    click.echo(f"  {label:<11} {text}")


def _request_line(item: dict[str, Any]) -> None:
    request = item.get("request")
    if isinstance(request, dict) and request.get("method"):
        body = json.dumps(request.get("body") or {})
        _line("", f"would send: {request['method']} {request.get('path')} {body}")


def render_result(data: dict[str, Any]) -> None:
    """The human view of one run record."""
    head = [data["status"], data["persona"]]
    if data.get("work_key"):
        head.append(str(data["work_key"]))
    if data.get("run_id"):
        head.append(f"run={data['run_id']}")
    autonomy = data.get("autonomy") or {}
    if autonomy:
        head.append(f"tier={autonomy['effective']}")
    click.echo(" ".join(head))
    if autonomy and autonomy["effective"] != autonomy["declared"]:
        _line("autonomy:", autonomy["reason"])
    for item in data.get("dry_runs") or []:
        _line(
            "dry run:",
            f"{item['call_id']} {item['tool']} {json.dumps(item['arguments'])} "
            f"[{item['side_effect_level']}] receipt={item.get('receipt_id')}",
        )
        _request_line(item)
    for item in data.get("proposals") or []:
        _line(
            "proposal:",
            f"{item['call_id']} {item['tool']} {json.dumps(item['arguments'])} "
            f"receipt={item.get('receipt_id')}",
        )
        _request_line(item)
    for item in data.get("approvals") or []:
        who = f" by {item['by']}" if item.get("by") else ""
        _line(
            "approval:",
            f"{item['call_id']} {item['tool']} {item['status']}{who} "
            f"receipt={item.get('receipt_id')}",
        )
    for item in data.get("tool_calls") or []:
        if item.get("executed"):
            _line("executed:", f"{item['call_id']} {item['tool']} -> {item['status']}")
    for item in data.get("denied") or []:
        receipt = item.get("receipt") or {}
        reason = receipt.get("reason") if isinstance(receipt, dict) else None
        _line(
            "denied:",
            f"{item['call_id']} {item['tool']} {json.dumps(item['arguments'])} "
            f"receipt={item.get('receipt_id')}",
        )
        if reason:
            _line("", f"{item['status']}: {reason}")
        if isinstance(receipt, dict) and receipt.get("rule"):
            _line("", f"rule {receipt['rule']!r} ({receipt.get('dimension')})")
    for item in data.get("handoffs") or []:
        if item["status"] == "dispatched":
            override = " with policy_override" if item.get("policy_override") else ""
            _line(
                "handoff:",
                f"{item['kind']} -> {item['target']} via route {item['route_id']} "
                f"(when {item['when']}) {item['handoff_id']}{override}",
            )
        else:
            _line("handoff:", f"{item['kind']} not routed: {item.get('error')}")
    budget = data.get("budget") or {}
    if budget:
        _line(
            "spend:",
            f"${budget['run_usd']:.6f}, {budget['run_tokens']} tokens, "
            f"{budget['model_calls']} model call(s)",
        )
    stop = data.get("budget_stop")
    if stop:
        _line("budget:", f"{stop.get('message')} receipt={stop.get('receipt_id')}")
    receipts = data.get("receipts") or []
    if receipts:
        kinds: dict[str, int] = {}
        for r in receipts:
            kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
        summary = ", ".join(f"{k.removeprefix('persona.')} x{n}" for k, n in kinds.items())
        _line("receipts:", f"{len(receipts)} ({summary})")
    if data.get("result") is not None:
        _line("result:", json.dumps(data["result"]))
    if data.get("error") and not stop:
        _line("error:", str(data["error"]))
    admission = data.get("admission") or {}
    detail = admission.get("detail") or {}
    if data["status"] == "queued" and detail.get("reason"):
        why = "at max_concurrency" if detail["reason"] == "max_concurrency" else "behind queue"
        _line("queued:", f"{why}, position {detail.get('position')}; runs when a lease frees")
    for item in data.get("drained") or []:
        error = f" ({item['error']})" if item.get("error") else ""
        _line("drained:", f"{item['work_key']} -> {item['status']} run={item['run_id']}{error}")
    for warning in data.get("warnings") or []:
        _line("warning:", warning)


@click.command("run")
@click.argument("name")
@click.option("--provider", default=None, help="Trigger source: github, linear, slack, ...")
@click.option("--kind", default=None, help="Trigger kind (pr_opened, check_run, ...).")
@click.option("--metadata", multiple=True, metavar="K=V", help="Trigger metadata.")
@click.option(
    "--payload",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="A trigger envelope {provider, kind, metadata} or a webhook body ('-' = stdin).",
)
@click.option("--schedule", is_flag=True, help="A schedule wake (work key per minute).")
@click.option("--work-key", default=None, help="Work key of a manual or schedule run.")
@click.option("--handoff", "handoff_id", default=None, help="Run this inbox handoff.")
@click.option("--inbox", is_flag=True, help="Run every handoff waiting in the inbox.")
@click.option("--resume", is_flag=True, help="Resume a paused persona and run its queue.")
@click.option(
    "--tier", type=click.Choice(TIER_CHOICES), default=None, help="Lower the autonomy tier."
)
@click.option(
    "--llm",
    default=None,
    metavar="PROVIDER",
    callback=check_llm,
    help="Model provider: mock, mock:SCRIPT.json, openai, anthropic, ollama "
    "(default $CHARTER_LLM, else mock).",
)
@click.option("--model", default=None, help="Override model_policy.default_model.")
@click.option(
    "--workspace",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Workspace of the builtin tools (default: the manifest's directory).",
)
@click.option(
    "--approval-timeout",
    type=click.FloatRange(min=0),
    default=None,
    help="Seconds to wait for a durable approval (default: until decided); then expired.",
)
@click.option("--no-input", is_flag=True, help="Never ask on the terminal; use the event log.")
@click.option("--force", is_flag=True, help="Run a trigger the persona does not declare.")
@click.option(
    "--rerun",
    is_flag=True,
    help="Run a trigger whose work key already ran or was recorded, under KEY#rerun:TIME.",
)
@click.option(
    "--manifest", type=click.Path(path_type=Path), default=None, help="charter.toml or its dir."
)
@click.option("--state", "state_url", default=None, metavar="URL", help="postgresql://...")
@click.option("--state-dir", type=click.Path(path_type=Path), default=None, help="SQLite dir.")
@click.option("--at", "at_text", default=None, metavar="RFC3339", help="Act as of this time.")
@click.option("--json", "as_json", is_flag=True, help="Print stable JSON.")
@click.pass_context
def run_cmd(
    ctx: click.Context,
    name: str,
    provider: str | None,
    kind: str | None,
    metadata: tuple[str, ...],
    payload: Path | None,
    schedule: bool,
    work_key: str | None,
    handoff_id: str | None,
    inbox: bool,
    resume: bool,
    tier: str | None,
    llm: str | None,
    model: str | None,
    workspace: Path | None,
    approval_timeout: float | None,
    no_input: bool,
    force: bool,
    rerun: bool,
    manifest: Path | None,
    state_url: str | None,
    state_dir: Path | None,
    at_text: str | None,
    as_json: bool,
) -> None:
    """Wake NAME and run its entry workflow with its charter enforced.

    Admission is the runtime's (pause, disable, lease, duplicate, budget). The workflow
    runs in-process under the persona's policy, stages, autonomy tier, live budget and
    receipt policy. Exit 0 when the run completed (or the work was queued / a duplicate),
    1 otherwise, 2 for malformed input.
    """
    from charter.run import (
        InteractiveApprover,
        ManifestInvalid,
        PricingError,
        RunError,
        RunOptions,
        resume_in_session,
        run_handoff_in_session,
        run_in_session,
        run_inbox_in_session,
        session_scope,
    )
    from charter.run.errors import ForeignWorkflow, UnknownPersona
    from charter.runtime import EventLogError, PersonaRuntimeError, TriggerError, parse_time
    from charter.runtime import parse_metadata as parse_meta

    llm = llm_from_env(llm)
    modes = sum(
        bool(x)
        for x in (provider or payload or metadata or kind, schedule, handoff_id, inbox, resume)
    )
    if modes > 1:
        _fail(
            "choose one of: a trigger (--provider/--payload), --schedule, --handoff, --inbox, "
            "--resume",
            EXIT_BAD_INPUT,
        )
    at = None
    if at_text is not None:
        try:
            at = parse_time(at_text)
        except ValueError as exc:
            _fail(f"--at: {exc}", EXIT_BAD_INPUT)
    try:
        meta = parse_meta(metadata)
    except TriggerError as exc:
        _fail(str(exc), EXIT_BAD_INPUT)
    body: dict[str, Any] | None = None
    if payload is not None:
        provider, file_kind, file_meta, body = load_trigger_file(payload, provider)
        kind = kind or file_kind
        meta = {**file_meta, **meta}
    elif (kind or meta) and provider is None:
        _fail("--kind/--metadata need --provider", EXIT_BAD_INPUT)
    interactive = not no_input and sys.stdin.isatty() and sys.stderr.isatty()
    options = RunOptions(
        manifest=_manifest(ctx, manifest),
        state_dir=state_dir,
        state_url=state_url,
        at=at,
        llm=llm,
        model=model,
        tier=tier,
        approver=InteractiveApprover() if interactive else None,
        approval_timeout=approval_timeout,
        workspace=workspace,
        force=force,
        rerun=rerun,
        notify=lambda message: click.echo(message, err=True),
    )
    try:
        with session_scope(options) as session:
            if resume:
                resumed = resume_in_session(session, name)
                output: dict[str, Any] = resumed.to_dict()
                ok = resumed.ok
                runs = [r.to_dict() for r in resumed.runs]
            elif inbox or handoff_id:
                results = (
                    run_inbox_in_session(session, name)
                    if inbox
                    else [run_handoff_in_session(session, name, str(handoff_id))]
                )
                runs = [r.to_dict() for r in results]
                output = runs[0] if handoff_id else {"runs": runs}
                ok = all(r.ok for r in results)
            else:
                result = run_in_session(
                    session,
                    name,
                    provider=provider,
                    kind=kind,
                    metadata=meta,
                    payload=body,
                    schedule=schedule,
                    work_key=work_key,
                )
                output, ok, runs = result.to_dict(), result.ok, [result.to_dict()]
    except ManifestInvalid as exc:
        _fail(str(exc), EXIT_BAD_INPUT, kind="manifest_invalid")
    except ForeignWorkflow as exc:
        _fail(str(exc), EXIT_BAD_INPUT, kind="foreign_workflow")
    except UnknownPersona as exc:
        _fail(str(exc), EXIT_BAD_INPUT, kind="unknown_persona")
    except TriggerError as exc:
        _fail(str(exc), EXIT_BAD_INPUT)
    except (RunError, PersonaRuntimeError, EventLogError, PricingError) as exc:
        _fail(str(exc))
    if as_json:
        emit_json(output)
    else:
        if resume:
            control = output["control"]
            message = f" ({control['message']})" if control.get("message") else ""
            click.echo(f"{name}: resume -> {control['lifecycle']}{message}")
        if not runs and (inbox or resume):
            click.echo(f"{name}: nothing to run")
        for data in runs:
            render_result(data)
    sys.exit(0 if ok else EXIT_FAILED)


def register(group: click.Group) -> None:
    """Attach ``run`` to the ``persona`` group."""
    group.add_command(run_cmd)


__all__ = ["load_trigger_file", "register", "render_result", "run_cmd"]
