"""The runtime CLI, end to end, on both backends.

Uses the real ``charter`` entry point once the lead has wired ``register`` into the
``persona`` group; until then, a ``persona`` group built with ``register``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from charter.cli.persona_runtime_cmd import register

MANIFEST = """
[[personas]]
name = "merge_captain"
version = "0.1.0"
description = "Owns pull request readiness."
entry_workflow = "ops.merge_captain:run"
tools = ["github"]
autonomy_tier = "act_with_approval"
receipt_policy = "required"
triggers = ["github.pr_opened", "github.check_failed"]
schedules = ["*/30 * * * *"]
handoffs = ["review_captain"]
budget = { daily_usd = 20.0, hourly_usd = 0.05, run_usd = 0.03, max_tokens = 5000, \
  frontier_escalations = 3 }

[[personas]]
name = "review_captain"
description = "Reviews."
entry_workflow = "ops.review:run"
tools = ["github"]
autonomy_tier = "suggest"
receipt_policy = "optional"
triggers = ["github.review_requested"]
"""


def entry_point() -> click.Group:
    from charter.cli import cli

    persona = cli.get_command(click.Context(cli), "persona")
    if isinstance(persona, click.Group) and "tick" in persona.commands:
        return cli
    root = click.Group("charter")
    group = click.Group("persona")
    register(group)
    root.add_command(group)
    return root


@pytest.fixture
def run(tmp_path: Path, state_location: dict[str, str]):  # type: ignore[no-untyped-def]
    (tmp_path / "charter.toml").write_text(MANIFEST)
    state = (
        ["--state", state_location["url"]]
        if "url" in state_location
        else ["--state-dir", state_location["state_dir"]]
    )
    root = entry_point()

    def invoke(*args: str, expect: int = 0, json_out: bool = True):  # type: ignore[no-untyped-def]
        argv = ["persona", *args, "--manifest", str(tmp_path), *state]
        if json_out:
            argv.append("--json")
        result = CliRunner().invoke(root, argv, catch_exceptions=False)
        assert result.exit_code == expect, (argv, result.output, result.stderr)
        if expect == 0 and json_out and args[0] != "supervision":
            return json.loads(result.stdout)
        return result

    return invoke


AT = "2026-04-24T12:30:00Z"


def test_seed_flow(run) -> None:  # type: ignore[no-untyped-def]
    status = run("status", "merge_captain", "--at", AT)
    assert status["lifecycle"] == "inactive"
    assert status["next_scheduled_run"] == "2026-04-24T13:00:00Z"
    assert status["budget"]["limits"]["daily_usd"] == 20.0

    tick = run("tick", "merge_captain", "--at", AT, "--cost-usd", "0.02", "--tokens", "120")
    assert tick["status"] == "completed" and tick["run_id"] and tick["budget_receipt_id"]
    trig = run(
        "trigger", "merge_captain", "--provider", "github", "--kind", "pull_request",
        "--metadata", "repository=burin-labs/harn", "--metadata", "number=462", "--at", AT,
    )  # fmt: skip
    assert trig["work_key"] == "github:burin-labs/harn:pr:462"
    assert trig["status"] == "completed"
    dup = run(
        "trigger", "merge_captain", "--provider", "github", "--kind", "pull_request",
        "--metadata", "repository=burin-labs/harn", "--metadata", "number=462", "--at", AT,
        expect=1,
    )  # fmt: skip
    assert json.loads(dup.stdout)["status"] == "duplicate"
    over = run(
        "tick", "merge_captain", "--at", "2026-04-24T12:31:00Z", "--cost-usd", "0.04", expect=1
    )
    over = json.loads(over.stdout)
    assert over["status"] == "budget_exhausted" and over["budget_receipt_id"]
    assert over["exhaustion_reason"] == "run_usd"

    assert run("pause", "merge_captain", "--at", AT)["lifecycle"] == "paused"
    queued = run("tick", "merge_captain", "--at", "2026-04-24T12:32:00Z")
    assert queued["status"] == "queued"
    resumed = run("resume", "merge_captain", "--at", "2026-04-24T12:33:00Z")
    assert [d["status"] for d in resumed["drained"]] == ["completed"]
    assert run("disable", "merge_captain", "--at", AT)["lifecycle"] == "disabled"
    dead = run("tick", "merge_captain", "--at", "2026-04-24T12:34:00Z", expect=1)
    assert json.loads(dead.stdout)["status"] == "dead_lettered"
    # resuming a disabled persona is refused: exit 1, the receipt still printed (issue 31)
    refused = run("resume", "merge_captain", "--at", AT, expect=1)
    assert json.loads(refused.stdout)["lifecycle"] == "disabled"
    assert run("enable", "merge_captain", "--at", AT)["lifecycle"] == "idle"
    spend = run("spend", "merge_captain", "--cost-usd", "0.01", "--at", AT)
    assert spend["status"] == "completed"

    status = run("status", "merge_captain", "--at", "2026-04-24T12:35:00Z")
    assert status["dead_lettered"] == 1
    assert status["budget"]["spent"]["day_tokens"] == 120

    recorded = run("tick", "merge_captain", "--at", "2026-04-24T14:00:00Z", json_out=False)
    assert recorded.stdout.startswith("recorded merge_captain ")
    refused = run("tick", "merge_captain", "--at", "2026-04-24T14:01:00Z", "--error", "boom",
                  json_out=False, expect=1)  # fmt: skip
    assert refused.stdout.startswith("failed merge_captain ") and "boom" in refused.stdout

    human = run("status", "merge_captain", "--at", AT, json_out=False)
    assert "lifecycle:" in human.stdout and "dead-lettered:      1" in human.stdout

    lines = run("supervision", "tail", "--persona", "merge_captain", "--since-event-id", "3")
    frames = [json.loads(line) for line in lines.stdout.splitlines()]
    assert frames[0]["event_id"] == 4
    assert set(frames[0]) == {
        "event_id", "persona_id", "persona_kind", "persona_version",
        "actor", "update_kind", "occurred_at", "payload",
    }  # fmt: skip
    assert frames[0]["persona_id"] == "merge_captain"
    assert frames[0]["persona_version"] == "0.1.0"
    limited = run("supervision", "tail", "--limit", "2").stdout.splitlines()
    assert [json.loads(x)["event_id"] for x in limited] == [1, 2]


def test_webhook_payload_and_undeclared_trigger(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    payload = tmp_path / "hook.json"
    payload.write_text(
        json.dumps(
            {
                "action": "completed",
                "check_run": {"id": 991, "head_sha": "abc", "conclusion": "failure"},
                "repository": {"full_name": "burin-labs/harn"},
            }
        )
    )
    receipt = run(
        "trigger", "merge_captain", "--provider", "github", "--payload", str(payload), "--at", AT
    )
    assert receipt["work_key"] == "github:burin-labs/harn:check:991:completed"
    refused = run(
        "trigger", "merge_captain", "--provider", "linear", "--kind", "issue",
        "--metadata", "identifier=ENG-1", "--at", AT, expect=1, json_out=False,
    )  # fmt: skip
    assert "does not declare trigger linear.issue" in refused.stderr
    assert "Traceback" not in refused.output
    forced = run(
        "trigger", "merge_captain", "--provider", "linear", "--kind", "issue",
        "--metadata", "identifier=ENG-1", "--at", AT, "--force",
    )  # fmt: skip
    assert forced["work_key"] == "linear:issue:ENG-1"


def test_trigger_takes_the_envelopes_persona_run_takes(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    envelope = tmp_path / "envelope.json"
    envelope.write_text(
        json.dumps(
            {
                "provider": "github",
                "kind": "check_failed",
                "metadata": {"repository": "burin-labs/harn", "check_run_id": "17"},
            }
        )
    )
    receipt = run("trigger", "merge_captain", "--payload", str(envelope), "--at", AT)
    assert receipt["work_key"] == "github:burin-labs/harn:check:17"
    # a whole webhook body still needs to say where it came from
    body = tmp_path / "body.json"
    body.write_text(json.dumps({"action": "completed", "check_run": {"id": 3}}))
    refused = run(
        "trigger", "merge_captain", "--payload", str(body), "--at", AT, expect=2, json_out=False
    )
    assert "--provider" in refused.stderr and "Traceback" not in refused.output
    bare = run("trigger", "merge_captain", "--at", AT, expect=2, json_out=False)
    assert "--provider" in bare.stderr


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("status", "merge_captain", "--at", "yesterday"), 2, "RFC 3339"),
        (("status", "nobody", "--at", AT), 2, "unknown persona"),
        (
            (
                "trigger",
                "merge_captain",
                "--provider",
                "github",
                "--kind",
                "pull_request",
                "--metadata",
                "oops",
                "--at",
                AT,
            ),
            2,
            "key=value",
        ),
        (
            (
                "trigger",
                "merge_captain",
                "--provider",
                "github",
                "--kind",
                "pull_request",
                "--at",
                AT,
            ),
            2,
            "needs metadata repository, number",
        ),
        (("tick", "merge_captain", "--cost-usd", "-1"), 2, "-1"),
    ],
)
def test_bad_input_is_a_clear_error(run, args, code, message) -> None:  # type: ignore[no-untyped-def]
    out = run(*args, expect=code, json_out=False)
    assert message in out.output and "Traceback" not in out.output


def test_bad_state_url_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "charter.toml").write_text(MANIFEST)
    root = entry_point()
    result = CliRunner().invoke(
        root,
        ["persona", "status", "merge_captain", "--manifest", str(tmp_path), "--state", "mysql://x"],
    )
    assert result.exit_code == 1 and "unsupported state URL" in result.output


FOLLOWER = """
import click, sys
from charter.cli.persona_runtime_cmd import register
g = click.Group("persona"); register(g)
g(sys.argv[1:], prog_name="charter persona")
"""


def test_tail_follow_prints_new_appends(tmp_path: Path, state_location: dict[str, str]) -> None:
    (tmp_path / "charter.toml").write_text(MANIFEST)
    state = (
        ["--state", state_location["url"]]
        if "url" in state_location
        else ["--state-dir", state_location["state_dir"]]
    )
    common = ["--manifest", str(tmp_path), *state]
    proc = subprocess.Popen(
        [sys.executable, "-c", FOLLOWER, "supervision", "tail", "--follow", "--limit", "2",
         "--timeout", "20", *common],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    root = entry_point()
    try:
        for minute in ("00", "01"):
            result = CliRunner().invoke(
                root,
                [
                    "persona",
                    "tick",
                    "merge_captain",
                    "--at",
                    f"2026-04-24T13:{minute}:00Z",
                    *common,
                ],
            )
            assert result.exit_code == 0, result.output
        out, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    frames = [json.loads(line) for line in out.splitlines()]
    assert [f["event_id"] for f in frames] == [1, 2]
    assert frames[0]["update_kind"] == "persona.schedule.fired"


def test_status_of_an_expired_unrecovered_lease(run) -> None:  # type: ignore[no-untyped-def]
    """A held run whose lease expired (its process died) is not active and makes the
    persona 'failed' before the next acquisition recovers it; it used to stay 'starting'
    with the dead run under active_runs."""
    held = run("tick", "review_captain", "--at", AT, "--hold")
    assert held["status"] == "started"
    live = run("status", "review_captain", "--at", AT)
    assert live["lifecycle"] == "starting" and len(live["active_runs"]) == 1
    later = run("status", "review_captain", "--at", "2026-04-25T12:30:00Z")
    assert [lease["run_id"] for lease in later["expired_leases"]] == [held["run_id"]]
    assert later["lifecycle"] == "failed" and later["active_runs"] == []
    again = run("tick", "review_captain", "--at", "2026-04-25T12:31:00Z")
    assert again["status"] == "completed"
    after = run("status", "review_captain", "--at", "2026-04-25T12:32:00Z")
    assert after["expired_leases"] == [] and after["lifecycle"] == "idle"


def test_trigger_refuses_a_payload_its_triggers_do_not_match(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Issue 31: a persona declaring only ``github.review_requested`` ran on a pull
    request ``opened`` (matched by family); refused now, exit 1 naming its triggers,
    unless ``--force``."""
    fixtures = Path(__file__).parent / "fixtures" / "github"
    opened = str(fixtures / "pull_request.opened.json")
    refused = run(
        "trigger", "review_captain", "--provider", "github", "--payload", opened, "--at", AT,
        expect=1, json_out=False,
    )  # fmt: skip
    assert "does not declare trigger github.pr_opened" in refused.stderr
    assert "declared:" in refused.stderr and "Traceback" not in refused.output
    requested = str(fixtures / "pull_request.review_requested.json")
    taken = run(
        "trigger", "review_captain", "--provider", "github", "--payload", requested, "--at", AT
    )
    assert taken["status"] == "completed"
    # --force records it anyway; opened and review_requested on one head are one piece
    # of work for a reviewer (the same work key), so it is that run's duplicate
    forced = run(
        "trigger", "review_captain", "--provider", "github", "--payload", opened, "--at", AT,
        "--force", expect=1,
    )  # fmt: skip
    assert json.loads(forced.stdout)["status"] == "duplicate"
    assert json.loads(forced.stdout)["work_key"] == taken["work_key"]
