"""The hash chain (issue 14): tamper with the rows, `charter audit verify` names the event.

On both backends: an edited payload, a deleted row, two rows swapped and a removed tail
are each found, with the first bad event id; an intact log verifies, including payloads
with floats and non-ASCII text and events written by concurrent writers.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from click.testing import CliRunner

from charter.runtime import EventLog, NewEvent
from charter.runtime.audit import verify

AT = datetime(2026, 11, 21, 9, tzinfo=UTC)


def fill(log: EventLog, n: int = 8) -> None:
    for i in range(n):
        log.append(
            [
                NewEvent(
                    "p" if i % 2 else "q",
                    "persona.run.completed",
                    AT + timedelta(seconds=i, microseconds=7 * i),
                    {
                        "i": i,
                        "cost": 0.1 + 0.2 * i,
                        "note": "zürich ✓",
                        "nested": {"b": 1, "a": [i]},
                    },
                )
            ]
        )


def sql(log: EventLog, statement: str, params: tuple[Any, ...] = ()) -> None:
    """Change the rows behind charter's back (as an attacker with the file or DB would)."""
    if log.backend == "sqlite":
        conn = sqlite3.connect(log.path)  # type: ignore[attr-defined]
        statement = statement.replace("{heads}", "chain_heads")
        conn.execute(statement.replace("%s", "?").replace("{events}", "events"), params)
        conn.commit()
        conn.close()
    else:
        with log._conn.transaction():  # type: ignore[attr-defined]
            schema = log.schema  # type: ignore[attr-defined]
            statement = statement.replace("{heads}", f'"{schema}".chain_heads')
            log._conn.execute(statement.replace("{events}", f'"{schema}".events'), params)  # type: ignore[attr-defined]


def cli(location: dict[str, str], *args: str) -> Any:
    from charter.cli import cli as root

    where = (
        ["--state", location["url"]]
        if "url" in location
        else ["--state-dir", location["state_dir"]]
    )
    return CliRunner().invoke(root, ["audit", *args, *where], catch_exceptions=False)


def test_an_intact_log_verifies(log: EventLog, state_location: dict[str, str]) -> None:
    fill(log)
    report = verify(log)
    assert report.ok and report.chained == 8 and report.unchained == 0
    out = cli(state_location, "verify", "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["head"] == report.head
    rows = [json.loads(line) for line in cli(state_location, "export").stdout.splitlines()]
    assert [r["event_id"] for r in rows] == list(range(1, 9)) and all(r["chain"] for r in rows)


def test_an_edited_row_is_named(log: EventLog, state_location: dict[str, str]) -> None:
    fill(log)
    payload = '{"i": 3, "cost": 0.0, "note": "paid", "nested": {"a": [3], "b": 1}}'
    if log.backend == "sqlite":
        sql(log, "UPDATE {events} SET payload = %s WHERE event_id = 3", (payload,))
    else:
        sql(log, "UPDATE {events} SET payload = %s::jsonb WHERE event_id = 3", (payload,))
    out = cli(state_location, "verify", "--json")
    assert out.exit_code == 1
    data = json.loads(out.stdout)
    assert data["ok"] is False and data["first_bad_event_id"] == 3
    assert [p["event_id"] for p in data["problems"]] == [3]  # only its own link breaks
    text = cli(state_location, "verify")
    assert "first bad event 3" in text.output


def test_deleted_swapped_and_truncated_rows_are_found(
    log: EventLog, log_factory: Callable[[], EventLog]
) -> None:
    fill(log)
    sql(log, "DELETE FROM {events} WHERE event_id = 5")
    report = verify(log)
    assert report.first_bad_event_id == 5 and "missing" in report.problems[0]["problem"]

    # swap two rows' contents (a reorder): both links break, the first is named
    sql(log, "UPDATE {events} SET kind = 'x.swap' WHERE event_id = 2")
    assert verify(log).first_bad_event_id == 2

    # the tail removed: the log no longer reaches the recorded last id
    other = log_factory()
    try:
        fill(other, 2)  # concurrent writer: the chain continues across connections
    finally:
        other.close()
    sql(log, "DELETE FROM {events} WHERE event_id = 10")
    problems = verify(log).problems
    assert any("tail was removed" in p["problem"] for p in problems)


def test_writers_on_two_connections_keep_one_chain(log_factory: Callable[[], EventLog]) -> None:
    first, second = log_factory(), log_factory()
    try:
        for _ in range(3):
            fill(first, 2)
            fill(second, 2)
        report = verify(first)
        assert report.ok and report.chained == 12
    finally:
        first.close()
        second.close()


def test_the_console_run_page_shows_the_runs_chain_status(
    log: EventLog, state_location: dict[str, str]
) -> None:
    from charter.run import RunOptions
    from charter.run.web.data import ConsoleData

    fill(log, 3)
    log.append(
        [NewEvent("p", "persona.run.started", AT, {"run_id": "run_9", "i": n}) for n in range(3)]
    )
    options = RunOptions(
        state_dir=state_location.get("state_dir"), state_url=state_location.get("url")
    )
    data = ConsoleData(options, clock=lambda: AT)
    run = data.run("run_9")
    assert run is not None and run["hash_chain"] == "intact (3 events)"
    sql(log, "UPDATE {events} SET actor = 'mallory' WHERE event_id = 5")
    run = data.run("run_9")
    assert run is not None and run["hash_chain"] == "broken at event 5 (run charter audit verify)"


def _rechain(log: EventLog) -> None:
    """What an attacker with write access does after editing: recompute every link of
    every persona chain, and their recorded heads."""
    from charter.runtime.audit import chain_hash

    previous: dict[str, str] = {}
    for event in list(log.iter_all()):
        link = previous[event.persona] = chain_hash(previous.get(event.persona), event)
        sql(log, "UPDATE {events} SET chain = %s WHERE event_id = %s", (link, event.event_id))
        sql(log, "UPDATE {heads} SET link = %s WHERE persona = %s AND event_id = %s",
            (link, event.persona, event.event_id))  # fmt: skip


def test_signed_checkpoints_catch_a_rewritten_and_rechained_history(
    log: EventLog, state_location: dict[str, str]
) -> None:
    from charter.cli import cli as root

    keys = json.loads(CliRunner().invoke(root, ["audit", "keygen", "--json"]).stdout)
    env = {"CHARTER_AUDIT_SIGNING_KEY": keys["private_key"]}
    fill(log)
    unsigned = cli(state_location, "verify", "--key", keys["public_key"], "--json")
    assert unsigned.exit_code == 1
    assert (
        json.loads(unsigned.stdout)["problems"][0]["problem"] == "no signed checkpoint in the log"
    )

    where = ["--state", state_location["url"]] if "url" in state_location else [
        "--state-dir", state_location["state_dir"]]  # fmt: skip
    signed = CliRunner(env=env).invoke(
        root, ["audit", "checkpoint", "--json", "--at", "2026-11-21T10:00:00Z", *where]
    )
    assert signed.exit_code == 0, signed.output
    head = json.loads(signed.stdout)
    assert head["event_id"] == 8 and head["checkpoint_event_id"] == 9
    assert head["v"] == 2 and head["chains"] == 2  # p and q (before the checkpoint's own)
    fill(log, 2)  # work continues after the checkpoint
    ok = cli(state_location, "verify", "--key", keys["public_key"], "--json")
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["signatures"]["signed_through"] == 8
    assert (
        "signed through event 8"
        in cli(state_location, "verify", "--key", keys["public_key"]).output
    )

    # hostile: rewrite event 3 and recompute every link: the plain chain verifies again...
    payload = '{"i": 3, "cost": 0.0, "note": "paid", "nested": {"a": [3], "b": 1}}'
    cast = "%s" if log.backend == "sqlite" else "%s::jsonb"
    sql(log, "UPDATE {events} SET payload = " + cast + " WHERE event_id = 3", (payload,))
    _rechain(log)
    assert cli(state_location, "verify").exit_code == 0
    # ...but the signed head no longer matches the log
    caught = cli(state_location, "verify", "--key", keys["public_key"], "--json")
    assert caught.exit_code == 1
    (problem,) = json.loads(caught.stdout)["problems"]
    assert problem["event_id"] == 8 and "rewritten" in problem["problem"]

    # a checkpoint re-signed with the attacker's own key is not accepted either
    other = json.loads(CliRunner().invoke(root, ["audit", "keygen", "--json"]).stdout)
    forged = cli(state_location, "verify", "--key", other["public_key"], "--json")
    assert forged.exit_code == 1
    assert json.loads(forged.stdout)["problems"][0]["problem"] == "checkpoint signed by another key"


def test_the_human_output_names_the_chains(log: EventLog, state_location: dict[str, str]) -> None:
    from charter.cli import cli as root

    keys = json.loads(CliRunner().invoke(root, ["audit", "keygen", "--json"]).stdout)
    where = ["--state", state_location["url"]] if "url" in state_location else [
        "--state-dir", state_location["state_dir"]]  # fmt: skip
    fill(log)
    env = {"CHARTER_AUDIT_SIGNING_KEY": keys["private_key"]}
    signed = CliRunner(env=env).invoke(root, ["audit", "checkpoint", *where])
    assert signed.exit_code == 0 and "signed the heads at event 8 (2 chain(s)" in signed.output
    verified = cli(state_location, "verify", "--key", keys["public_key"])
    assert verified.exit_code == 0, verified.output
    assert "9 chained event(s) link up to event 9 in 3 persona chain(s)" in verified.output


def test_signing_input_errors_are_clear(state_location: dict[str, str], log: EventLog) -> None:
    bad = cli(state_location, "verify", "--key", "not-a-key", "--json")
    assert bad.exit_code == 2
    assert json.loads(bad.stdout)["error"]["field_path"] == "--key"
    none = cli(state_location, "checkpoint", "--json")
    assert none.exit_code == 2 and "CHARTER_AUDIT_SIGNING_KEY" in none.stdout
