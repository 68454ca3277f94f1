"""Admission is the runtime's: pause/queue/resume, disable, duplicates, leases, triggers."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from charter.run import RunOptions, open_session
from charter.runtime import ReceiptStatus

from .conftest import AT, envelope, executed, kinds, persona_cli, run_json

MERGE = {"calls": [{"tool": "github", "args": {"action": "merge", "pr": 7}, "stage": "act"}]}


def test_paused_work_is_queued_then_run_by_resume(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    pack = make_pack()
    assert persona_cli(pack, "pause", "actor", "--at", AT).exit_code == 0
    queued = run_json(pack, "actor", "--payload", str(envelope(tmp_path / "e.json", MERGE)))
    assert queued["status"] == "queued" and queued["run_id"] is None
    assert executed(pack) == []
    # the queued item carries its trigger; resume runs the workflow for it
    data = run_json(pack, "actor", "--resume")
    assert data["control"]["action"] == "resume"
    (run,) = data["runs"]
    assert run["status"] == "completed" and run["trigger"]["source"] == "queue"
    assert run["work_key"] == "webhook:test:go:1"
    assert data["control"]["drained"][0]["status"] == "completed"
    # the webhook body waited with the work: the drained run did what the trigger asked
    assert executed(pack) == [{"action": "merge", "pr": 7}]
    assert "persona.drain.completed" in kinds(pack)
    assert persona_cli(pack, "status", "actor", "--at", AT).output.count("idle") == 1


def test_disabled_dead_letters_and_duplicates_are_refused(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    pack = make_pack()
    plan_file = str(envelope(tmp_path / "e.json", MERGE))
    assert run_json(pack, "actor", "--payload", plan_file)["status"] == "completed"
    dup = run_json(pack, "actor", "--payload", plan_file, code=0)
    assert dup["status"] == "duplicate" and executed(pack) == [{"action": "merge", "pr": 7}]
    assert persona_cli(pack, "disable", "actor", "--at", AT).exit_code == 0
    other = str(envelope(tmp_path / "e2.json", MERGE, ident="2"))
    dead = run_json(pack, "actor", "--payload", other, code=1)
    assert dead["status"] == "dead_lettered"
    assert len(executed(pack)) == 1


def test_live_lease_makes_work_wait(make_pack: Callable[..., Path], tmp_path: Path) -> None:
    pack = make_pack()
    options = RunOptions(
        manifest=pack, state_dir=pack / "state", at=datetime(2026, 11, 21, 9, tzinfo=UTC)
    )
    session = open_session(options)
    try:
        held = session.runtime.tick("actor", at=options.at or datetime.now(UTC), hold=True)
        assert held.status is ReceiptStatus.STARTED
    finally:
        session.close()
    # a different work key at max_concurrency waits in the queue (exit 0), nothing runs yet
    data = run_json(pack, "actor", "--payload", str(envelope(tmp_path / "e.json", MERGE)))
    assert data["status"] == "queued"
    assert data["admission"]["detail"]["reason"] == "max_concurrency"
    assert executed(pack) == [] and data["drained"] == []
    human = persona_cli(pack, "status", "actor", "--at", AT)
    assert re.search(r"queued:\s+1\n", human.output)
    # the holder dies: once its lease expires the next arrival runs the queue first (FIFO)
    later = "2026-11-21T10:00:00Z"
    second = str(envelope(tmp_path / "e2.json", MERGE | {"calls": []}, ident="2"))
    data = run_json(pack, "actor", "--payload", second, at=later)
    assert data["status"] == "queued"  # behind the queued key, never ahead of it
    assert [(d["work_key"], d["status"]) for d in data["drained"]] == [
        ("webhook:test:go:1", "completed"),
        ("webhook:test:go:2", "completed"),
    ]
    assert executed(pack) == [{"action": "merge", "pr": 7}]
    order = [k for k in kinds(pack) if k in ("persona.lease.expired", "persona.run.started")]
    assert order[:2] == ["persona.run.started", "persona.lease.expired"]


def test_same_work_key_while_leased_is_busy_not_queued(make_pack: Callable[..., Path]) -> None:
    pack = make_pack()
    options = RunOptions(
        manifest=pack, state_dir=pack / "state", at=datetime(2026, 11, 21, 9, tzinfo=UTC)
    )
    session = open_session(options)
    try:
        key = "manual:actor:2026-11-21T09:00Z"
        held = session.runtime.tick("actor", at=options.at or datetime.now(UTC), work_key=key,
                                    hold=True)  # fmt: skip
        assert held.status is ReceiptStatus.STARTED
    finally:
        session.close()
    data = run_json(pack, "actor", code=1)
    assert data["status"] == "lease_busy" and data["drained"] == []


def test_manual_and_schedule_runs(make_pack: Callable[..., Path]) -> None:
    pack = make_pack()
    manual = run_json(pack, "actor")
    assert manual["trigger"]["source"] == "manual"
    assert manual["work_key"] == "manual:actor:2026-11-21T09:00Z"
    scheduled = run_json(pack, "actor", "--schedule")
    assert scheduled["trigger"]["source"] == "schedule"
    assert scheduled["work_key"] == "schedule:actor:2026-11-21T09:00Z"


def test_bad_input_and_unknowns(make_pack: Callable[..., Path], tmp_path: Path) -> None:
    pack = make_pack()
    undeclared = persona_cli(
        pack, "run", "actor", "--provider", "github", "--kind", "pr_opened",
        "--metadata", "repository=a/b", "--metadata", "number=1", "--at", AT,
    )  # fmt: skip
    assert undeclared.exit_code == 1 and "does not declare" in undeclared.output
    unknown = persona_cli(pack, "run", "nobody", "--at", AT)
    assert unknown.exit_code == 2 and "unknown persona" in unknown.output  # bad input
    bad_at = persona_cli(pack, "run", "actor", "--at", "yesterday")
    assert bad_at.exit_code == 2
    both = persona_cli(pack, "run", "actor", "--schedule", "--inbox", "--at", AT)
    assert both.exit_code == 2
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    assert persona_cli(pack, "run", "actor", "--payload", str(broken)).exit_code == 2


def test_workflow_error_fails_the_run(make_pack: Callable[..., Path], tmp_path: Path) -> None:
    pack = make_pack()
    plan = {"fail": "boom"}
    data = run_json(pack, "actor", "--payload", str(envelope(tmp_path / "e.json", plan)), code=1)
    assert data["status"] == "failed" and "RuntimeError: boom" in data["error"]
    status = json.loads(persona_cli(pack, "status", "actor", "--json", "--at", AT).stdout)
    assert status["lifecycle"] == "failed"


def test_help_lists_run_approve_deny() -> None:
    from .conftest import invoke

    assert "approve" in invoke(["--help"]).output
    assert "run" in invoke(["persona", "--help"]).output


def test_a_recorded_key_says_so_and_rerun_runs_it(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    """issue 14: a key recorded by persona trigger must not silently block a real run."""
    pack = make_pack()
    key_args = ["--provider", "test", "--kind", "go", "--metadata", "id=77"]
    recorded = persona_cli(pack, "trigger", "actor", *key_args, "--at", AT)
    assert recorded.exit_code == 0 and recorded.output.startswith("recorded")
    dup = run_json(pack, "actor", *key_args)
    assert dup["status"] == "duplicate"
    assert "only recorded by charter persona trigger" in dup["error"]
    assert "--rerun" in dup["error"]
    again = run_json(pack, "actor", *key_args, "--rerun", at="2026-11-21T09:30:00Z")
    assert again["status"] == "completed"
    assert again["work_key"].startswith(dup["work_key"] + "#rerun:")
    ran = run_json(pack, "actor", *key_args, "--rerun", at="2026-11-21T09:30:00Z")
    assert ran["status"] == "duplicate" and "already run by charter persona run" in ran["error"]
