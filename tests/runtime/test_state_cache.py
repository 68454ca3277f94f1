"""A runtime holds the persona states it read or wrote (``StateCache``) and folds only
later events into forks of them (issue 15). Whatever two runtimes on one log do, each
one's state must equal a full replay; nothing a caller or a rolled-back transaction does
to a state may reach the held one."""

from __future__ import annotations

import contextlib
import tempfile
import threading
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from runtime_support import AT0

from charter.runtime import (
    EventLog,
    Kind,
    PersonaRuntime,
    PersonaRuntimeSpec,
    ReceiptStatus,
    SqliteEventLog,
    StateCache,
    UnknownRunError,
)
from charter.runtime.state import PersonaState, apply

W = "wide"
T = timedelta
SPEC = PersonaRuntimeSpec(W, max_concurrency=2, lease_ttl_seconds=60, triggers=("test.*",))


def _go(rt: PersonaRuntime, key: str, at: Any, **kw: Any) -> Any:
    return rt.trigger(W, provider="test", kind="go", metadata={"id": key}, at=at, **kw)


class Boom(Exception):
    pass


def _step(rt: PersonaRuntime, op: str, key: str, at: Any) -> None:
    if op == "run":
        _go(rt, key, at)
    elif op == "hold":
        _go(rt, key, at, hold=True)
    elif op == "accept":
        _go(rt, key, at, defer=True, payload={"id": key, "type": "go"})
    elif op == "finish":
        runs = rt.state(W).runs
        if runs:
            # (refused when its lease expired meanwhile: recovered as failed instead)
            with contextlib.suppress(UnknownRunError):
                rt.finish_run(W, sorted(runs)[0], at=at)
    elif op == "drain":
        rt.drain(W, at=at, execute=lambda r, _q: rt.finish_run(W, r.run_id or "", at=at))
    elif op == "pause":
        rt.pause(W, at=at)
    elif op == "resume":
        rt.resume(W, at=at)
    elif op == "rollback":
        # a transaction that changed the state and then failed: nothing of it may stay
        def body(batch: Any) -> None:
            batch.emit(W, Kind.WORK_QUEUED, {"work_key": f"ghost:{key}"})
            batch.emit(W, Kind.PAUSED, {})
            raise Boom

        with pytest.raises(Boom):
            rt.transact(at, body, persona=W)
    elif op == "mutate":
        # a caller changing the state it was given
        state = rt.state(W)
        state.queue.append({"work_key": "caller's own"})
        state.control = "disabled"
        for lease in state.leases.values():
            lease["expires_at"] = "2000-01-01T00:00:00Z"
        state.spend["total_usd"] = 99.0


OPS = ["run", "hold", "accept", "finish", "drain", "pause", "resume", "rollback", "mutate"]


@settings(max_examples=30, deadline=None)
# found in CI: the held run's lease expired before the finish (a refused finish)
@example([(0, "hold", "a"), *[(0, "run", "a")] * 8, (0, "finish", "a")])
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.sampled_from(OPS), st.sampled_from("abcd")),
        min_size=1,
        max_size=40,
    )
)
def test_two_runtimes_on_one_log_match_a_full_replay(steps: list[tuple[int, str, str]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        # as two processes would, the first with two threads sharing one cache (serve)
        logs = [SqliteEventLog(tmp), SqliteEventLog(tmp), SqliteEventLog(tmp)]
        runtimes = [PersonaRuntime(log, [SPEC]) for log in logs[:2]]
        runtimes.append(PersonaRuntime(logs[2], [SPEC], cache=runtimes[0].projection.cache))
        try:
            for n, (who, op, key) in enumerate(steps):
                _step(runtimes[who], op, key, AT0 + T(seconds=n * 7))
                for rt in runtimes:
                    assert rt.state(W) == rt.projection.rebuild(W), (n, op)
        finally:
            for log in logs:
                log.close()


def test_threads_sharing_a_cache_match_a_full_replay(log: EventLog) -> None:
    """A replica's threads (one connection each, one cache), and another replica, running
    at once: each thread's transaction may find a newer state in the cache than the one
    it asked for its rows after (PostgreSQL: ``test_prefetch_since.py``)."""
    shared = StateCache()
    errors: list[BaseException] = []

    def work(n: int) -> None:
        own = _second(log)  # (a SQLite connection serves the thread that opened it)
        rt = PersonaRuntime(own, [SPEC], cache=None if n == 0 else shared)

        def finish(run: Any, _queued: Any) -> Any:
            return rt.finish_run(W, run.run_id or "", at=AT0)

        try:
            for i in range(25):
                _go(rt, f"t{n}-{i}", AT0 + T(seconds=i), defer=i % 3 == 0)
                if i % 4 == 0:
                    rt.drain(W, at=AT0 + T(seconds=i), execute=finish)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            own.close()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    held = shared.get(W)
    assert held is not None
    reader = PersonaRuntime(log, [SPEC], cache=shared)
    replay = reader.projection.rebuild(W).to_dict()
    assert replay["counters"] and reader.state(W).to_dict() == replay


def test_a_writer_reads_only_the_events_after_the_state_it_holds(log: EventLog) -> None:
    rt = PersonaRuntime(log, [SPEC])
    other = PersonaRuntime(type(log)(log.path.parent) if isinstance(log, SqliteEventLog)
                           else type(log)(log.url), [SPEC])  # fmt: skip
    try:
        for n in range(40):
            _go(rt, f"k{n}", AT0)
        held = rt.projection.cache.get(W)
        assert held is not None and held[0].last_event_id == log.last_event_id()
        _go(other, "elsewhere", AT0 + T(seconds=1))  # another process writes
        seen: list[Any] = []
        real_load, real_since = log.load_persona, log.persona_since

        def load(*args: Any) -> Any:
            seen.append(("load", args))
            return real_load(*args)

        def since(persona: str, version: int, after: int, limit: int) -> Any:
            answer = real_since(persona, version, after, limit)
            seen.append((after, answer))
            return answer

        log.load_persona = load  # type: ignore[method-assign]
        log.persona_since = since  # type: ignore[method-assign]
        state = rt.state(W)
        # no snapshot decoded: the held state and the one run written since (and where
        # the stored snapshot is, saved by rt's writes every 32 events)
        assert [(after, [e.kind for e in ev]) for after, (_, ev) in seen] == [
            (held[0].last_event_id, [Kind.TRIGGER_RECEIVED, Kind.LEASE_ACQUIRED,
             Kind.RUN_STARTED, Kind.RUN_COMPLETED, Kind.LEASE_RELEASED]),
        ]  # fmt: skip
        stored = seen[0][1][0]
        assert stored is not None and 200 - 32 < stored <= 200
        assert state.last_run is not None and state.last_run["work_key"].endswith("elsewhere")
        assert _go(rt, "elsewhere", AT0 + T(seconds=2)).status is ReceiptStatus.DUPLICATE
    finally:
        other.log.close()


def test_fork_shares_nothing_apply_changes() -> None:
    state = PersonaState(W)
    events = [
        (Kind.LEASE_ACQUIRED, {"lease_id": "l1", "expires_at": "2026-01-01T00:01:00Z"}),
        (Kind.RUN_STARTED, {"run_id": "r1", "lease_id": "l1", "work_key": "k"}),
        (Kind.WORK_QUEUED, {"work_key": "q"}),
    ]
    from charter.runtime import Event

    for n, (kind, payload) in enumerate(events, 1):
        apply(state, Event(n, "t", W, kind, AT0, payload, "a", None))
    before = state.to_dict()
    fork = state.fork()
    later = [
        (Kind.LEASE_RENEWED, {"lease_id": "l1", "expires_at": "2026-01-01T00:09:00Z"}),
        (Kind.RUN_RUNNING, {"run_id": "r1"}),
        (Kind.RUN_PARKED, {"run_id": "r1", "approval_id": "a"}),
        (Kind.WORK_QUEUED, {"work_key": "q2"}),
        (Kind.WORK_DEQUEUED, {"work_key": "q"}),
        (Kind.SPEND_RECORDED, {"cost_usd": 1.0}),
        (Kind.HANDOFF_RECEIVED, {"handoff_id": "h"}),
        (Kind.RUN_COMPLETED, {"run_id": "r1", "work_key": "k"}),
        (Kind.PAUSED, {}),
    ]
    for n, (kind, payload) in enumerate(later, 10):
        apply(fork, Event(n, "t", W, kind, AT0, payload, "a", None))
    assert state.to_dict() == before


def _count_saves(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each snapshot a writer saves, by its queue length."""
    import charter.runtime.engine as engine

    saved: list[int] = []
    real = engine.save_state

    def save(txn: Any, state: PersonaState) -> None:
        saved.append(len(state.queue))
        real(txn, state)

    monkeypatch.setattr(engine, "save_state", save)
    return saved


def _second(log: EventLog) -> EventLog:
    return type(log)(log.path.parent) if isinstance(log, SqliteEventLog) else type(log)(log.url)  # type: ignore[attr-defined]


def test_runtimes_taking_turns_save_a_snapshot_every_32_events_between_them(
    log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replica's threads each hold a runtime: each counted the tail from its own last
    read, so three of them saved about three snapshots where one was due. Each read now
    says where the stored snapshot is."""
    saved = _count_saves(monkeypatch)
    logs = [log, _second(log), _second(log)]
    runtimes = [PersonaRuntime(one, [SPEC]) for one in logs]
    try:
        for n in range(60):  # 5 events a run: 300 events
            _go(runtimes[n % 3], f"k{n}", AT0 + T(seconds=n))
        events = log.last_event_id()
        assert events == 300
        assert events // 32 - 1 <= len(saved) <= events // 32 + 1, saved
        assert runtimes[0].state(W).to_dict() == runtimes[0].projection.rebuild(W).to_dict()
    finally:
        for one in logs[1:]:
            one.close()


def test_a_backlog_is_saved_after_more_events_and_still_read_right(
    log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Saving a snapshot costs its queue's length: with 400 queued the writer lets a
    quarter of that follow the stored snapshot, not 32 events. A reader without a held
    state folds that longer tail and does not compact it (take the write lock) first."""
    rt = PersonaRuntime(log, [SPEC])
    rt.pause(W, at=AT0)
    for n in range(400):
        _go(rt, f"q{n}", AT0 + T(seconds=1))
    saved = _count_saves(monkeypatch)
    for n in range(200):  # 2 events each (received, queued): 400 events
        _go(rt, f"r{n}", AT0 + T(seconds=2))
    assert len(saved) <= 5 and all(q >= 400 for q in saved), saved  # was 12 (every 32)
    reader = PersonaRuntime(_second(log), [SPEC])
    commits = reader.log.commits if hasattr(reader.log, "commits") else None
    try:
        state = reader.state(W)
        assert len(state.queue) == 600
        assert state.to_dict() == rt.projection.rebuild(W).to_dict()
        if commits is not None:
            assert reader.log.commits == commits  # read without compacting
    finally:
        reader.log.close()
