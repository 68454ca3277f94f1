"""charter.run: personas that run, with their charter enforced in-process.

:func:`run_persona` admits work through :class:`charter.runtime.PersonaRuntime` (pause,
disable, lease, duplicate and budget exactly as the runtime defines them), then runs the
persona's ``entry_workflow`` with:

- its effective policy as the base frame, its stages applied to ``@step`` s, a handoff's
  ``policy_override`` replacing both for handoff runs (decisions stay ``charter.policy``);
- its autonomy tier enforced on side-effecting calls (:mod:`charter.run.autonomy`);
- live budgets (:mod:`charter.run.budget`, prices from ``[pricing]``), its model policy;
- receipts per ``receipt_policy`` (:mod:`charter.run.receipts`), handoffs routed by
  ``[[handoff_routes]]``, and ``persona_runtime[]`` snapshots on the run record;
- its rollout arm and earned standing (:mod:`charter.run.rollout`,
  :mod:`charter.run.promotion`): autonomy decided by its receipts.
"""

from .approvals import (
    ApprovalVerdict,
    Approver,
    CallbackApprover,
    InteractiveApprover,
    pending_approvals,
    resolve_approval,
)
from .budget import BudgetStop, LiveBudget
from .context import RunContext, TriggerEnvelope
from .engine import (
    OK_STATUSES,
    ResumeResult,
    RunResult,
    drain_in_session,
    execute_admitted,
    resume_in_session,
    resume_persona,
    run_handoff_in_session,
    run_in_session,
    run_inbox_in_session,
    run_persona,
    runtime_snapshot,
)
from .errors import (
    ApprovalError,
    LeaseLost,
    ManifestInvalid,
    ModelProviderFailed,
    PricingError,
    ReceiptError,
    RunError,
    RunStopped,
    UnknownPersona,
    WorkflowLoadError,
)
from .events import RunKind
from .prices import ModelPrice, PriceTable, load_prices
from .promotion import PromotionError, wilson
from .rollout import RolloutArm, cohort_values, select_arm, work_bucket
from .session import LLM_ENV, RunOptions, Session, open_session, session_scope
from .tiers import TIERS, effective_tier, is_side_effecting

__all__ = [
    "PromotionError",
    "RolloutArm",
    "cohort_values",
    "select_arm",
    "wilson",
    "work_bucket",
    "LLM_ENV",
    "OK_STATUSES",
    "TIERS",
    "ApprovalError",
    "ApprovalVerdict",
    "Approver",
    "BudgetStop",
    "CallbackApprover",
    "InteractiveApprover",
    "LeaseLost",
    "LiveBudget",
    "ManifestInvalid",
    "UnknownPersona",
    "ModelPrice",
    "PriceTable",
    "PricingError",
    "ReceiptError",
    "ResumeResult",
    "RunContext",
    "RunError",
    "RunKind",
    "RunOptions",
    "RunResult",
    "ModelProviderFailed",
    "RunStopped",
    "Session",
    "TriggerEnvelope",
    "WorkflowLoadError",
    "effective_tier",
    "execute_admitted",
    "is_side_effecting",
    "load_prices",
    "open_session",
    "pending_approvals",
    "resolve_approval",
    "drain_in_session",
    "resume_in_session",
    "resume_persona",
    "run_handoff_in_session",
    "run_in_session",
    "run_inbox_in_session",
    "run_persona",
    "runtime_snapshot",
    "session_scope",
]
