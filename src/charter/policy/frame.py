"""A policy frame: one layer of the execution-policy stack."""

from __future__ import annotations

from dataclasses import dataclass

from .model import Policy

#: Frame kinds charter pushes; free-form strings are accepted for host-defined layers.
FRAME_KINDS = ("ambient", "persona", "stage", "scope", "worker", "handoff", "launch", "file")


@dataclass(frozen=True, slots=True)
class Frame:
    """A policy plus where it came from (named in every decision and receipt)."""

    policy: Policy
    label: str = "policy"
    kind: str = "ambient"
    source_handoff: str | None = None
    stage: str | None = None
