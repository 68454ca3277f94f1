"""Event kinds ``charter.run`` appends to ``persona.runtime.events`` (besides the runtime's).

Receipts (written according to the persona's ``receipt_policy``) carry a ``receipt_id``;
mechanism events (approval requests and resolutions, the run record) are always written.
"""

from __future__ import annotations


class RunKind:
    """``update_kind`` values of the events a persona run writes."""

    # receipts: one per side-effecting call, approval and budget decision
    TOOL_EXECUTING = "persona.tool.executing"
    TOOL_EXECUTED = "persona.tool.executed"
    TOOL_DENIED = "persona.tool.denied"
    TOOL_DRY_RUN = "persona.tool.dry_run"
    TOOL_PROPOSED = "persona.tool.proposed"
    BUDGET_RESERVED = "persona.budget.reserved"
    USAGE_RECORDED = "persona.usage.recorded"
    MODEL_ESCALATED = "persona.model.escalated"
    MODEL_ESCALATION_REFUSED = "persona.model.escalation_refused"
    MODEL_FALLBACK = "persona.model.fallback"
    # mechanism: durable approvals and the run record
    APPROVAL_REQUESTED = "persona.approval.requested"
    APPROVAL_GRANTED = "persona.approval.granted"
    APPROVAL_DENIED = "persona.approval.denied"
    APPROVAL_EXPIRED = "persona.approval.expired"
    RUN_RECORDED = "persona.run.recorded"
    RUN_TRANSCRIPT = "persona.run.transcript"
    #: a side-effecting call's result or a model's response, for a persona whose receipts
    #: are disabled: the journal a retried run replays (issue 31)
    RUN_JOURNALED = "persona.run.journaled"
    # rollout evidence and standing (issue 18)
    AGREEMENT_RECORDED = "persona.rollout.agreement"
    AUTONOMY_PROMOTED = "persona.autonomy.promoted"
    AUTONOMY_DEMOTED = "persona.autonomy.demoted"


APPROVAL_RESOLUTIONS = frozenset(
    {RunKind.APPROVAL_GRANTED, RunKind.APPROVAL_DENIED, RunKind.APPROVAL_EXPIRED}
)

__all__ = ["APPROVAL_RESOLUTIONS", "RunKind"]
