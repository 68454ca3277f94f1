"""Append throughput on SQLite and PostgreSQL: single-event transactions, batched appends,
and batched appends against a raw bulk write of the same rows (issue 15).

The raw baseline writes the very rows the log stores into the log's own table, one
transaction per batch: PostgreSQL ``COPY ... FROM STDIN``, SQLite ``BEGIN IMMEDIATE`` + one
``executemany``. Its rows are built in the timed loop from the same ``NewEvent`` batches
by the fastest straight-line code at hand (ids, RFC 3339 time, the payload's JSON, the
hash-chain link: what any writer of these rows pays), so ``append/raw`` is what the log
adds: the write lock, reading the head, ``Event`` objects, the topic row and NOTIFY.
``prebuilt`` times the bulk write alone (rows built before the clock starts): the floor
no writer reaches without skipping the JSON and the chain, printed for reference.

    python benchmarks/runtime_append.py [--batches 200] [--size 100] [--rounds 5]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from charter.runtime import TOPIC, EventLog, NewEvent, format_time
from charter.runtime.postgres_log import split_state_url
from charter.runtime.sqlite_log import DB_FILENAME
from runtime_common import backends, drop, fresh, open_at

AT = datetime(2026, 4, 24, tzinfo=UTC)
COLUMNS = "topic, event_id, persona, persona_version, actor, kind, occurred_at, payload, chain"


def event(i: int) -> NewEvent:
    # a typical run event: a few ids, a work key, a small nested object
    return NewEvent(
        "bench",
        "persona.run.completed",
        AT,
        {
            "i": i,
            "work_key": f"webhook:bench:go:k{i}",
            "run_id": f"run_{i}",
            "lease_id": f"lease_{i}",
            "cost": {"usd": 0.0, "tokens": 0},
        },
        actor="charter",
        persona_version="1",
    )


def row_builder() -> Callable[[list[NewEvent]], list[tuple[Any, ...]]]:
    """The fastest straight-line code I know turning a batch of ``NewEvent`` into the rows
    the log stores: ids from 1, RFC 3339 time, the payload's JSON (the C encoder made
    once, as ``charter.runtime.rows`` does), the chain link over the canonical form with
    the payload encoded once. No ``Event`` objects, no caches; keeps id and chain head."""
    encode = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
        None, None, json.encoder.encode_basestring, None, ":", ",", True, False, True
    )
    quote = json.encoder.encode_basestring  # type: ignore[attr-defined]
    state: dict[str, Any] = {"id": 0, "head": b""}

    def build(batch: list[NewEvent]) -> list[tuple[Any, ...]]:
        rows = []
        head, next_id = state["head"], state["id"]
        for new in batch:
            next_id += 1
            when = format_time(new.occurred_at)
            payload = "".join(encode(new.payload, 0))
            version = "null" if new.persona_version is None else quote(new.persona_version)
            canonical = (
                f"[{next_id},{quote(TOPIC)},{quote(new.persona)},{version},{quote(new.actor)},"
                f'{quote(new.kind)},"{when}",{payload}]'
            )
            link = hashlib.sha256(head + b"\n" + canonical.encode()).hexdigest()
            head = link.encode()
            rows.append((TOPIC, next_id, new.persona, new.persona_version, new.actor, new.kind,
                         when, payload, link))  # fmt: skip
        state["head"], state["id"] = head, next_id
        return rows

    return build


def check_rows(location: str, batches: list[list[NewEvent]]) -> None:
    """The baseline writes exactly the log's rows: same chain head at the end."""
    log = open_at(location)
    try:
        for batch in batches:
            log.append(batch)
        build = row_builder()
        rows = [build(batch) for batch in batches]
        with log.read_view() as txn:
            last = txn.chains(after=txn.last_event_id() - 1)
        assert last == [(rows[-1][-1][1], rows[-1][-1][-1])], "the baseline's rows differ"
    finally:
        log.close()


def raw_postgres(location: str, batches: list[list[NewEvent]], prebuilt: bool) -> float:
    """Events/s of COPY into the log's own table, one transaction per batch; the rows are
    built in the timed loop from the same ``NewEvent`` (``prebuilt``: before it)."""
    open_at(location).close()  # create the schema exactly as the log does
    conninfo, schema = split_state_url(location)
    build = row_builder()
    ready = [build(batch) for batch in batches] if prebuilt else None
    with psycopg.connect(conninfo, autocommit=True) as conn:
        copy = sql.SQL("COPY {}.events ({}) FROM STDIN").format(
            sql.Identifier(schema), sql.SQL(COLUMNS)
        )
        start = time.perf_counter()
        for n, batch in enumerate(batches):
            rows = ready[n] if ready is not None else build(batch)
            with conn.transaction(), conn.cursor() as cur, cur.copy(copy) as cp:
                for row in rows:
                    cp.write_row(row)
        took = time.perf_counter() - start
    return sum(map(len, batches)) / took


def raw_sqlite(location: str, batches: list[list[NewEvent]], prebuilt: bool) -> float:
    """Events/s of one executemany per batch into the log's own table (same pragmas)."""
    open_at(location).close()
    build = row_builder()
    ready = [build(batch) for batch in batches] if prebuilt else None
    conn = sqlite3.connect(Path(location) / DB_FILENAME, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    insert = f"INSERT INTO events ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
    start = time.perf_counter()
    for n, batch in enumerate(batches):
        rows = ready[n] if ready is not None else build(batch)
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(insert, rows)
        conn.execute("COMMIT")
    took = time.perf_counter() - start
    conn.close()
    return sum(map(len, batches)) / took


def via_log(location: str, batches: list[list[NewEvent]]) -> float:
    log: EventLog = open_at(location)
    start = time.perf_counter()
    for batch in batches:
        log.append(batch)
    took = time.perf_counter() - start
    log.close()
    return sum(map(len, batches)) / took


def measure(root: str, name: str, run: Callable[[str], float]) -> float:
    location = fresh(root, name)
    try:
        return run(location)
    finally:
        drop(location)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--size", type=int, default=100, help="events per batch")
    parser.add_argument("--single", type=int, default=2000, help="single-event appends")
    parser.add_argument("--rounds", type=int, default=5, help="best of this many rounds")
    args = parser.parse_args()
    batches = [[event(b * args.size + i) for i in range(args.size)] for b in range(args.batches)]
    singles = [[event(i)] for i in range(args.single)]
    print(
        f"{args.batches} batches x {args.size} events, {args.single} single-event appends, "
        f"best of {args.rounds} interleaved rounds, events/s; raw = the same rows built from "
        "the same NewEvents by straight-line code, then bulk-written; prebuilt = the write only"
    )
    with backends() as targets:
        for backend, root in targets:
            measure(root, "check", lambda loc: check_rows(loc, batches[:3]) or 0.0)
            raw_fn: Callable[[str, list[list[NewEvent]], bool], float] = (
                raw_postgres if backend == "postgresql" else raw_sqlite
            )
            raw_name = "COPY" if backend == "postgresql" else "executemany"
            raws, prebuilt, logs = [], [], []
            for r in range(args.rounds):  # interleaved, so drift hits all alike
                raws.append(
                    measure(root, f"raw{r}", partial(raw_fn, batches=batches, prebuilt=False))
                )
                prebuilt.append(
                    measure(root, f"pre{r}", partial(raw_fn, batches=batches, prebuilt=True))
                )
                logs.append(measure(root, f"log{r}", lambda loc: via_log(loc, batches)))
            single = measure(root, "single", lambda loc: via_log(loc, singles))
            # best of: on a shared machine the slow rounds measure the neighbours
            raw, pre, batched = max(raws), max(prebuilt), max(logs)
            print(
                f"{backend:10s} single-event txns {single:7.0f} | EventLog.append x{args.size} "
                f"{batched:7.0f} | raw {raw_name} {raw:7.0f} (prebuilt {pre:7.0f}) | "
                f"append/raw {batched / raw:.2f}x (/prebuilt {batched / pre:.2f}x)"
            )


if __name__ == "__main__":
    main()
