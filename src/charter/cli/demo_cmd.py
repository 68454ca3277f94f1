"""``charter demo``: a walk-through of the policy core on built-in examples."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import click

from charter.cli._common import emit_json


def _walkthrough(workspace: Path) -> list[dict[str, Any]]:
    from charter.policy import (
        AgentScope,
        Policy,
        ToolCall,
        builtin_annotations,
        decide_current,
        effective,
        with_execution_policy,
        with_handoff_policy,
        with_scoped_executor,
    )
    from charter.policy.paths import make_context

    ctx = make_context(str(workspace))
    persona = Policy.from_dict(
        {
            "name": "persona:merge_captain",
            "tools": ["read", "grep", "glob", "edit", "bash", "github__*"],
            "side_effect_level": "process_exec",
            "paths": {"allow": ["./"], "deny": ["./secrets/**"]},
            "commands": {
                "allow": ["git:*", "npm test", "pytest:*"],
                "deny": ["git push --force:*"],
            },
            "network": {"deny": ["*"]},
        }
    )
    research = Policy.from_dict(
        {"tools": ["read", "grep", "glob"], "side_effect_level": "read_only"}
    )

    def call(name: str, **args: Any) -> ToolCall:
        return ToolCall(name, args, builtin_annotations(name) or ToolCall(name).annotations)

    steps: list[dict[str, Any]] = []

    def record(title: str, tc: ToolCall) -> None:
        d = decide_current(tc, context=ctx)
        steps.append(
            {
                "step": title,
                "call": {"tool": tc.name, "arguments": dict(tc.arguments)},
                **d.to_dict(),
            }
        )

    with with_execution_policy(persona, label="persona:merge_captain", kind="persona"):
        record("read a source file", call("read", file_path="src/app.py"))
        record("read .env (sensitive by default)", call("read", file_path="src/../.env"))
        record("edit under ./secrets", call("edit", file_path="secrets/token.txt"))
        record("run the tests", call("bash", command="npm test"))
        record(
            "force-push hidden in a compound line",
            call("bash", command="git status && timeout 5 git push -f origin main"),
        )
        record("curl through bash -c", call("bash", command="bash -c 'curl https://x.example'"))
        record("an unannotated MCP tool", ToolCall("github__merge_pr", {"pr": 1}))
        with with_execution_policy(
            research, label="stage:research", kind="stage", stage="research"
        ):
            record("stage research: grep", call("grep", pattern="TODO", path="src"))
            record("stage research: edit", call("edit", file_path="src/app.py"))
            scoped = with_scoped_executor(
                lambda c: {"ok": True}, {"tools": ["read"]}, stage="classify"
            )
            steps.append(
                {
                    "step": "with_scoped_executor: grep outside the classify scope",
                    "receipt": scoped(call("grep", pattern="x", path="src")),
                }
            )
    with (
        with_execution_policy(persona, label="persona:merge_captain", kind="persona"),
        with_handoff_policy(
            {"tools": ["read_note"], "side_effect_level": "read_only"},
            source_handoff="merge-receipt",
        ),
    ):
        record("handoff override replaces the session policy", call("read"))
        steps.append(
            {
                "step": "effective view under the handoff",
                "effective": effective(__import__("charter.policy").policy.current_stack()),
            }
        )
    scope = AgentScope(
        skills=("check-feeds", "summarize"), mcps=("search",), members=("researcher", "writer")
    )
    steps.append(
        {
            "step": "AgentScope -> policy + <scope> block",
            "policy": scope.policy().to_dict(),
            "prompt_block": scope.prompt_block(),
        }
    )
    return steps


@click.command()
@click.option(
    "--policy-only",
    is_flag=True,
    help="Only the policy walk-through (no runs, no state).",
)
@click.option(
    "--pack",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Template pack to run (default: examples/personas of this checkout).",
)
@click.option(
    "--state-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Keep the demo's SQLite state here (default: a temporary directory).",
)
@click.option("--json", "as_json", is_flag=True, help="Print stable JSON.")
def demo(policy_only: bool, pack: Path | None, state_dir: Path | None, as_json: bool) -> None:
    """The end-to-end demo: personas validated, run, approved, refused, handed off,
    paused and resumed, stopped by a budget (mock model, SQLite). ``--policy-only``: the
    policy core's walk-through."""
    if not policy_only:
        from charter.cli.demo_e2e import DemoError, run_demo

        try:
            steps = run_demo(
                pack=pack, state_dir=state_dir, echo=(lambda _line: None) if as_json else click.echo
            )
        except DemoError as exc:
            click.echo(f"error: demo failed: {exc}", err=True)
            raise SystemExit(1) from None
        if as_json:
            emit_json(
                [
                    {
                        "step": s.title,
                        "command": ["charter", *s.command],
                        "exit_code": s.exit_code,
                        "stdout": s.stdout,
                    }
                    for s in steps
                ]
            )
        return
    _policy_walkthrough(as_json)


def _policy_walkthrough(as_json: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="charter-demo-") as tmp:
        steps = _walkthrough(Path(tmp))
    if as_json:
        emit_json(steps)
        return
    click.echo("charter policy walk-through: one policy language, decided at every dispatch\n")
    for i, step in enumerate(steps, 1):
        click.echo(f"{i:2}. {step['step']}")
        if "decision" in step:
            mark = "allow" if step["decision"] == "allow" else "DENY "
            click.echo(f"    {mark} {step['tool']}: {step['reason']}")
            if step["rule"]:
                click.echo(f"          rule: {step['rule']}")
        elif "receipt" in step:
            click.echo("    " + json.dumps(step["receipt"]))
        elif "effective" in step:
            eff = step["effective"]
            click.echo(
                f"    tools allowed: {eff['tools']['allow']}; ceiling: {eff['side_effect_level']};"
                f" source_handoff: {eff['source_handoff']}"
            )
        else:
            click.echo("    policy: " + json.dumps(step["policy"]))
            click.echo("    " + step["prompt_block"].replace("\n", "\n    "))
