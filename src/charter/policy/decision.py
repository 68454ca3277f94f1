"""Typed decisions and the receipts a denied call turns into."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Outcome(StrEnum):
    """What happens to a call. ``ask`` is reserved for approval policies."""

    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"


@dataclass(frozen=True, slots=True)
class Decision:
    """The verdict on one call, with what decided it when it is not a plain allow."""

    outcome: Outcome
    tool: str
    reason: str
    frame_index: int | None = None
    frame_label: str | None = None
    frame_kind: str | None = None
    dimension: str | None = None
    rule: str | None = None
    subject: str | None = None

    @property
    def allowed(self) -> bool:
        return self.outcome is Outcome.ALLOW

    @property
    def denied(self) -> bool:
        return self.outcome is Outcome.DENY

    def to_dict(self) -> dict[str, Any]:
        return {
            "decision": self.outcome.value,
            "tool": self.tool,
            "reason": self.reason,
            "frame": None
            if self.frame_index is None
            else {"index": self.frame_index, "label": self.frame_label, "kind": self.frame_kind},
            "dimension": self.dimension,
            "rule": self.rule,
            "subject": self.subject,
        }

    def permission_denied(self) -> dict[str, Any]:
        """The ceiling receipt ``{error: "permission_denied", tool, reason}`` plus provenance."""
        return {
            "error": "permission_denied",
            "tool": self.tool,
            "reason": self.reason,
            "frame": self.frame_label,
            "dimension": self.dimension,
            "rule": self.rule,
        }
