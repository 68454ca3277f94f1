"""A drain's next item, admitted in the transaction that finishes the run before it.

Under a backlog a worker finished a run (one write transaction) and then admitted the
next queued item (another): two turns at the log's lock per run where one does. While a
drain executes an item, :meth:`PersonaRuntime.drain` arms a :class:`Follow` for the
persona on its thread; :meth:`PersonaRuntime.finish_run` on that thread admits the next
item in its own transaction, after the run's end and record, and the drain runs it
without a transaction of its own. The admission decides exactly as a drain transaction
would (the same function, on the same state), and commits with the finish or not at all.
It is armed only when at least two items wait (``FOLLOW_BACKLOG``): a single one is most
likely the one the replica that queued it has woken a worker for, and taking it here sent
that worker to an empty queue (at 50 webhooks/s on two replicas, alternating with the
tree before: the 202's p50 13.5 -> 40.4 ms in one run when every finish admitted;
27-32 -> 16-18 ms in two runs with this rule).

Measured (``runtime_fleet.py``, 600 webhooks at 100/s, alternating with the tree before):
one PostgreSQL replica 57 -> 65 runs/s and 149 -> 101 write transactions/s; two
replicas 56 -> 64 runs/s. The accepts then wait behind longer transactions: the 202's
p50 35 -> 41 ms on one replica, 76 -> 123 ms on two.

If admitting raises, the transaction is rolled back and the run is finished alone (a
broken admission must not cost a run that completed its end). If the drain cannot run
what was admitted (its executor raised), the admitted run is failed at once with the
reason, not left to the recovery rule.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from charter.errors import CharterError

if TYPE_CHECKING:
    from .engine import Batch
    from .receipts import RunReceipt

#: what an admission gave: the receipt, the queued item admitted, and whether more
#: items could start after it (another worker is woken for them)
Admitted = tuple["RunReceipt", dict[str, Any], bool]


class FollowFailed(CharterError):
    """Admitting the next item raised inside a finish transaction (rolled back)."""


@dataclass
class Follow:
    """The next admission of ``persona``'s drain on this thread (see the module doc)."""

    persona: str
    admit: Callable[[Batch], Admitted | None]
    #: the work keys at the queue's head as of the drain's last write (their duplicate
    #: window is read with the finish transaction's first round trip)
    keys: tuple[str, ...]
    staged: Admitted | None = None
    ready: Admitted | None = None

    def stage(self, batch: Batch) -> None:
        """Admit the next item into ``batch`` (the finish transaction's)."""
        try:
            self.staged = self.admit(batch)
        except Exception as exc:
            self.staged = None
            raise FollowFailed(f"admitting {self.persona}'s next item failed: {exc}") from exc

    def committed(self) -> None:
        """The finish transaction committed: what it admitted is the drain's next item."""
        self.ready, self.staged = self.staged, None

    def dropped(self) -> None:
        """The finish transaction did not commit: nothing was admitted."""
        self.staged = None


class Follows:
    """The follow armed on each thread (a runtime may be shared by threads)."""

    def __init__(self) -> None:
        self._local = threading.local()

    def get(self, persona: str) -> Follow | None:
        follow: Follow | None = getattr(self._local, "follow", None)
        if follow is None or follow.persona != persona or follow.ready is not None:
            return None  # (one admission per run: a second finish on the thread admits none)
        return follow

    def arm(self, follow: Follow | None) -> None:
        self._local.follow = follow
