"""Small grammars of the manifest: persona names, entry workflows, triggers, handoff targets.

Each parser returns a value or an error message; none raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
NAME_RULE = (
    "persona names use lower-case letters, digits, '_' and '-', start with a letter or digit "
    "and have at most 64 characters"
)

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_ENTRY_RE = re.compile(
    rf"^(?:(?P<path>[^:\s]+\.py)|(?P<module>{_IDENT}(?:\.{_IDENT})*)):(?P<func>{_IDENT}(?:\.{_IDENT})*)$"
)
#: Workflows of other hosts charter recognises: ``path/file.<ext>#function`` -> host.
FOREIGN_HOSTS: dict[str, str] = {"harn": "harn"}
_FOREIGN_RE = re.compile(rf"^(?P<path>[^#\s]+\.(?P<ext>[A-Za-z0-9]+))#(?P<func>{_IDENT})$")
_TRIGGER_RE = re.compile(r"^(?P<provider>[a-z][a-z0-9_-]*)\.(?P<event>[a-z0-9_][a-z0-9_.-]*)$")
_EVENT_RE = re.compile(r"^[a-z0-9_][a-z0-9_.-]*$")
_HUMAN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]*$")
_QUEUE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]*$")
_ENDPOINT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*(?::[0-9]{1,5})?(?:/[^\s]*)?$")

TargetKind = Literal["persona", "human", "worker", "a2a"]
TARGET_FORMS = "a persona name, persona://name, human:group, worker://queue or a2a://endpoint"


def check_name(name: str) -> str | None:
    """An error message when ``name`` is not a valid persona name."""
    if NAME_RE.match(name):
        return None
    return f"{NAME_RULE}; got {name!r}"


@dataclass(frozen=True, slots=True)
class EntryWorkflow:
    """A Python target (``path/to/module.py:function`` or ``package.module:function``), or
    a workflow of another host (``manifest.harn#run``: ``host`` names it)."""

    raw: str
    function: str
    module: str | None = None
    path: str | None = None
    host: str = "python"

    @property
    def runnable(self) -> bool:
        """Whether charter can execute it (a Python target)."""
        return self.host == "python"

    @property
    def foreign_message(self) -> str:
        """What ``check`` warns and ``persona run`` refuses with, for another host's entry."""
        return (
            f"entry_workflow {self.raw!r} is for another host ({self.host}); "
            "`persona run` cannot execute it"
        )

    def __str__(self) -> str:
        return self.raw


def parse_entry(raw: str) -> EntryWorkflow | str:
    """Parse an entry workflow; a message on failure."""
    m = _ENTRY_RE.match(raw)
    if m:
        return EntryWorkflow(raw, m["func"], module=m["module"], path=m["path"])
    foreign = _FOREIGN_RE.match(raw)
    if foreign and foreign["ext"].lower() in FOREIGN_HOSTS:
        host = FOREIGN_HOSTS[foreign["ext"].lower()]
        return EntryWorkflow(raw, foreign["func"], path=foreign["path"], host=host)
    return (
        "expected a Python target 'path/to/module.py:function' or "
        f"'package.module:function' (or a harn workflow 'file.harn#function'), got {raw!r}"
    )


@dataclass(frozen=True, slots=True)
class TriggerName:
    """``provider.event``, e.g. ``github.pr_opened``."""

    provider: str
    event: str

    def __str__(self) -> str:
        return f"{self.provider}.{self.event}"


def parse_trigger(raw: str) -> TriggerName | str:
    m = _TRIGGER_RE.match(raw)
    if not m:
        return f"expected 'provider.event' in lower case (e.g. github.pr_opened), got {raw!r}"
    return TriggerName(m["provider"], m["event"])


def check_event(raw: str) -> str | None:
    if _EVENT_RE.match(raw):
        return None
    return f"expected a lower-case event kind (e.g. pr_opened), got {raw!r}"


@dataclass(frozen=True, slots=True)
class HandoffTarget:
    """Where a handoff goes: a persona, a human group, a worker queue or an A2A endpoint."""

    kind: TargetKind
    value: str
    raw: str

    @property
    def uri(self) -> str:
        """Canonical spelling (``persona://name``, ``human:group``, ...)."""
        if self.kind == "human":
            return f"human:{self.value}"
        return f"{self.kind}://{self.value}"

    def __str__(self) -> str:
        return self.raw


def parse_target(raw: str) -> HandoffTarget | str:
    """Parse a handoff target's syntax (whether a persona exists is checked later)."""
    text = raw.strip()
    if text.startswith("persona://"):
        name = text[len("persona://") :]
        err = check_name(name)
        return (
            f"invalid persona target {raw!r}: {err}" if err else HandoffTarget("persona", name, raw)
        )
    if text.startswith("human:"):
        group = text[len("human:") :]
        if not _HUMAN_RE.match(group):
            return f"invalid human target {raw!r}: expected human:group (e.g. human:maintainers)"
        return HandoffTarget("human", group, raw)
    if text.startswith("worker://"):
        queue = text[len("worker://") :]
        if not _QUEUE_RE.match(queue):
            return f"invalid worker target {raw!r}: expected worker://queue"
        return HandoffTarget("worker", queue, raw)
    if text.startswith("a2a://"):
        endpoint = text[len("a2a://") :]
        if not _ENDPOINT_RE.match(endpoint):
            return f"invalid a2a target {raw!r}: expected a2a://host[:port][/path]"
        return HandoffTarget("a2a", endpoint, raw)
    if "://" in text or ":" in text:
        return f"unknown handoff target scheme in {raw!r}; expected {TARGET_FORMS}"
    if not NAME_RE.match(text):
        return f"malformed handoff target {raw!r}; expected {TARGET_FORMS}"
    return HandoffTarget("persona", text, raw)
