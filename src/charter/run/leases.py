"""Keeping a running run's lease alive, and stopping the run when it is lost.

A lease lives ``lease_ttl_seconds`` without a heartbeat; the runtime expires it in the
next transaction that touches the persona, on any replica, and the run counts as failed
(docs/runtime.md, the recovery rule). That rule is for dead processes: a live run that
takes longer than its TTL (a long workflow, a slow model) must not look dead. So while the
workflow runs, a :class:`LeaseKeeper` renews the lease every third of the TTL from a
background thread on its own connection to the log.

The other half is fencing. A process that was stopped (SIGSTOP, a VM pause) or cut off
from the database (a network partition) for longer than its TTL has lost its lease: another
replica expired it and the work's sender may already have run it again elsewhere. Before
every tool call and model call the run asks :meth:`LeaseKeeper.check`: when the last
successful renewal is older than half the TTL (by this process's monotonic clock) it
renews synchronously first, and a lease that is gone stops the run (``control.fatal``)
before its next side effect. What remains is a tool call that itself outlasts the TTL.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from datetime import datetime

from charter.runtime import EventLog, PersonaRuntime, UnknownRunError

# one error for a lost lease, whether the keeper finds it or the receipt that precedes an
# action does (charter.run.receipts): a ReceiptError, so every call site stops the call
from .errors import LeaseLost

#: Renewals happen every TTL / 3 (as approval waits do), never more often than this.
MIN_INTERVAL_S = 1.0


class LeaseKeeper:
    """Renews ``run_id``'s lease while the workflow runs; see the module docstring.

    ``open_log`` opens a connection of the keeper's own for the background thread
    (``None``: the log is shared with the run's thread, so renewals happen only in
    :meth:`check`, on that thread). ``monotonic`` is injectable for tests."""

    def __init__(
        self,
        runtime: PersonaRuntime,
        name: str,
        run_id: str,
        *,
        ttl_seconds: float,
        clock: Callable[[], datetime],
        open_log: Callable[[], EventLog] | None = None,
        on_lost: Callable[[str], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.runtime = runtime
        self.name = name
        self.run_id = run_id
        self.ttl = float(ttl_seconds)
        self.interval = max(MIN_INTERVAL_S, self.ttl / 3)
        self.clock = clock
        self.open_log = open_log
        self.on_lost = on_lost
        self.monotonic = monotonic
        self.renewed_at = monotonic()  # the admission (or first heartbeat) just renewed it
        self.lost: str | None = None
        self.renewals = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the background thread ---------------------------------------------------

    def __enter__(self) -> LeaseKeeper:
        if self.open_log is not None:
            self._thread = threading.Thread(
                target=self._run, name=f"charter-lease-{self.run_id}", daemon=True
            )
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        assert self.open_log is not None
        log: EventLog | None = None
        own: PersonaRuntime | None = None
        try:
            while not self._stop.wait(self.interval) and self.lost is None:
                try:
                    if log is None or own is None:
                        log = self.open_log()
                        own = PersonaRuntime(
                            log,
                            self.runtime.personas,
                            routes=self.runtime.routes,
                            ids=self.runtime.ids,
                            holder=self.runtime.holder,
                            actor=self.runtime.actor,
                        )
                    self._renew(own)
                except LeaseLost:
                    return
                except Exception:
                    # the database is away (a restart, a partition): keep trying; check()
                    # stops the run once the lease may have expired meanwhile
                    if log is not None:
                        with contextlib.suppress(Exception):
                            log.close()
                    log = own = None
        finally:
            if log is not None:
                with contextlib.suppress(Exception):
                    log.close()

    # -- renewing ---------------------------------------------------------------

    def _renew(self, runtime: PersonaRuntime) -> None:
        started = self.monotonic()
        with self._lock:
            if self.lost is not None:
                raise LeaseLost(self.lost)
            try:
                runtime.heartbeat(self.name, self.run_id, at=self.clock())
            except UnknownRunError as exc:
                self.lost = f"lease lost: {exc}; the run stops before its next call"
                if self.on_lost is not None:
                    self.on_lost(self.lost)
                raise LeaseLost(self.lost) from exc
            # measured from before the call: a slow renewal does not extend the lease
            self.renewed_at = max(self.renewed_at, started)
            self.renewals += 1

    def check(self) -> None:
        """Raise :class:`LeaseLost` if the lease is gone; renew first (on the caller's
        connection) when the last renewal is older than half the TTL."""
        if self.lost is not None:
            raise LeaseLost(self.lost)
        if self.monotonic() - self.renewed_at < self.ttl / 2:
            return
        try:
            self._renew(self.runtime)
        except LeaseLost:
            raise
        except Exception as exc:
            # cannot tell: the lease may have expired while we could not reach the log.
            # Fail closed once it is past its TTL; before that, carry on and retry.
            if self.monotonic() - self.renewed_at >= self.ttl:
                self.lost = f"lease unconfirmed for {self.ttl:g}s ({exc}); the run stops"
                if self.on_lost is not None:
                    self.on_lost(self.lost)
                raise LeaseLost(self.lost) from exc


__all__ = ["LeaseKeeper", "LeaseLost", "MIN_INTERVAL_S"]
