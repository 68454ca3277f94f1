"""charter.runtime: the event-sourced continuous persona runtime.

- :class:`EventLog` with two backends, :class:`SqliteEventLog` (default, WAL, under
  ``.charter/personas``) and :class:`PostgresEventLog` (``postgresql://`` URL or
  ``CHARTER_STATE_URL``), chosen by :func:`open_event_log`; topic ``persona.runtime.events``.
- :class:`PersonaRuntime` admits work under leases and budgets, queues it while paused,
  dead-letters it while disabled, and returns typed :class:`RunReceipt` s.
- Status is a projection (snapshot + tail): :class:`StatusProjection`, :func:`render_status`.
- Handoff routes: :func:`select_route`, :func:`dispatch_handoff`, :func:`adopt_handoff_policy`.
- The supervision feed: :func:`tail`, :func:`follow`, :func:`supervision_frame`.

Every time-dependent function takes an explicit ``at``/``now``.
"""

from typing import TYPE_CHECKING, Any

from .budget import BudgetRefusal, check_budget
from .clock import format_time, parse_time
from .engine import (
    Batch,
    PersonaRuntime,
    PersonaRuntimeError,
    UndeclaredTriggerError,
    UnknownPersonaError,
    UnknownRunError,
    WorkItem,
)
from .events import TOPIC, Event, Kind, NewEvent
from .handoffs import (
    Dispatcher,
    Handoff,
    HandoffError,
    HandoffRecord,
    HandoffTarget,
    RouteContext,
    SelectedRoute,
    adopt_handoff_policy,
    dispatch_handoff,
    route_context,
    select_route,
)
from .ids import EventIds, IdFactory, SeededIds
from .log import Completion, EventLog, EventLogError, LogTransaction, Prefetch, Snapshot
from .projection import StateCache, StatusProjection
from .receipts import ControlReceipt, LeaseInfo, ReceiptStatus, RunReceipt
from .schedules import ScheduleError, next_scheduled_run, validate_schedule
from .spec import (
    BUILTIN_PREDICATES,
    BudgetSpec,
    HandoffRoute,
    PersonaRuntimeSpec,
    RouteRule,
    SpecError,
)
from .sqlite_log import SqliteEventLog
from .state import PersonaState
from .status import LIFECYCLE_STATES, PersonaStatus, lifecycle, render_status
from .store import DEFAULT_STATE_DIR, STATE_URL_ENV, open_event_log
from .supervision import follow, supervision_frame, tail, to_ndjson
from .triggers import (
    PR_HEAD_ACTIONS,
    NormalizedTrigger,
    TriggerError,
    declares_trigger,
    delivery_id,
    github_kind,
    linear_kind,
    normalize_trigger,
    parse_metadata,
    slack_kind,
    subject_of,
)

if TYPE_CHECKING:
    from .postgres_log import PostgresEventLog


def __getattr__(name: str) -> Any:
    # psycopg costs ~150 ms to import: load the PostgreSQL backend only when asked for.
    if name == "PostgresEventLog":
        from .postgres_log import PostgresEventLog

        return PostgresEventLog
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BUILTIN_PREDICATES",
    "DEFAULT_STATE_DIR",
    "LIFECYCLE_STATES",
    "STATE_URL_ENV",
    "TOPIC",
    "Batch",
    "BudgetRefusal",
    "BudgetSpec",
    "ControlReceipt",
    "Dispatcher",
    "Event",
    "EventIds",
    "EventLog",
    "EventLogError",
    "Handoff",
    "HandoffError",
    "HandoffRecord",
    "HandoffRoute",
    "HandoffTarget",
    "IdFactory",
    "Kind",
    "LeaseInfo",
    "LogTransaction",
    "NewEvent",
    "NormalizedTrigger",
    "PR_HEAD_ACTIONS",
    "delivery_id",
    "subject_of",
    "PersonaRuntime",
    "PersonaRuntimeError",
    "PersonaRuntimeSpec",
    "PersonaState",
    "PersonaStatus",
    "PostgresEventLog",
    "ReceiptStatus",
    "RouteContext",
    "RouteRule",
    "RunReceipt",
    "ScheduleError",
    "SeededIds",
    "SelectedRoute",
    "Snapshot",
    "Completion",
    "Prefetch",
    "SpecError",
    "SqliteEventLog",
    "StateCache",
    "StatusProjection",
    "TriggerError",
    "UndeclaredTriggerError",
    "UnknownPersonaError",
    "UnknownRunError",
    "WorkItem",
    "adopt_handoff_policy",
    "check_budget",
    "declares_trigger",
    "github_kind",
    "linear_kind",
    "slack_kind",
    "dispatch_handoff",
    "follow",
    "format_time",
    "lifecycle",
    "next_scheduled_run",
    "normalize_trigger",
    "open_event_log",
    "parse_metadata",
    "parse_time",
    "render_status",
    "route_context",
    "select_route",
    "supervision_frame",
    "tail",
    "to_ndjson",
    "validate_schedule",
]
