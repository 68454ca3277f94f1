"""A tool call as the policy sees it: a name, arguments and the tool's annotations."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .levels import UNANNOTATED_LEVEL, SideEffectLevel
from .names import canonical_name

#: ACP-style tool kinds that write to the paths they name.
WRITE_KINDS = frozenset({"edit", "delete", "move", "write"})
#: Kinds that read the paths they name.
READ_KINDS = frozenset({"read", "search"})
KNOWN_KINDS = frozenset(
    {
        "read",
        "search",
        "edit",
        "write",
        "delete",
        "move",
        "execute",
        "fetch",
        "think",
        "switch_mode",
        "delegate",
        "other",
    }
)

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ToolAnnotations:
    """What a tool declares about itself; the policy trusts nothing else.

    ``path_args`` are read or written according to ``kind`` (both when the kind does
    not say); ``read_path_args`` / ``write_path_args`` say so explicitly.
    """

    side_effect_level: SideEffectLevel | None = None
    kind: str | None = None
    path_args: tuple[str, ...] = ()
    read_path_args: tuple[str, ...] = ()
    write_path_args: tuple[str, ...] = ()
    command_args: tuple[str, ...] = ()
    url_args: tuple[str, ...] = ()
    mcp_server: str | None = None
    skill_args: tuple[str, ...] = ()
    member_args: tuple[str, ...] = ()
    capabilities: tuple[str, ...] = ()

    @property
    def effective_level(self) -> SideEffectLevel:
        """The declared level, or the highest level when none is declared (fail closed)."""
        return UNANNOTATED_LEVEL if self.side_effect_level is None else self.side_effect_level

    @property
    def argument_subjects(self) -> bool:
        """Whether a call's verdict can depend on its arguments (paths, commands, URLs,
        skills, members it names)."""
        return bool(
            self.path_args
            or self.read_path_args
            or self.write_path_args
            or self.command_args
            or self.url_args
            or self.skill_args
            or self.member_args
        )

    def path_accesses(self) -> tuple[tuple[str, str], ...]:
        """``(argument, access)`` pairs with access ``read`` or ``write``."""
        out: list[tuple[str, str]] = []
        kind = self.kind
        for arg in self.path_args:
            if kind in WRITE_KINDS:
                out.append((arg, "write"))
            elif kind in READ_KINDS:
                out.append((arg, "read"))
            else:
                out.extend(((arg, "read"), (arg, "write")))
        out.extend((arg, "read") for arg in self.read_path_args)
        out.extend((arg, "write") for arg in self.write_path_args)
        return tuple(out)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolAnnotations:
        """Build annotations from a plain dict (as MCP ``annotations`` or a tool registry gives)."""

        def names(key: str) -> tuple[str, ...]:
            value = data.get(key, ())
            if isinstance(value, str):
                return (value,)
            return tuple(str(v) for v in value)

        level = data.get("side_effect_level")
        return cls(
            side_effect_level=None if level is None else SideEffectLevel.parse(level),
            kind=data.get("kind"),
            path_args=names("path_args"),
            read_path_args=names("read_path_args"),
            write_path_args=names("write_path_args"),
            command_args=names("command_args"),
            url_args=names("url_args"),
            mcp_server=data.get("mcp_server"),
            skill_args=names("skill_args"),
            member_args=names("member_args"),
            capabilities=names("capabilities"),
        )


_NO_ANNOTATIONS = ToolAnnotations()


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call to decide. ``name`` is canonicalised: lower-case, MCP tools as ``server__tool``."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    annotations: ToolAnnotations = field(default=_NO_ANNOTATIONS)
    #: The MCP server this call goes to: declared, or the ``server__`` prefix of the name.
    mcp_server: str | None = field(init=False, compare=False)
    #: The effective side-effect level as an int (unannotated = highest), for the hot path.
    level: int = field(init=False, compare=False, repr=False)
    #: Whether any argument needs checking beyond the tool name and level.
    has_subjects: bool = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        ann = self.annotations
        # a tool's calls share its name and annotations: derive the fields once per pair
        hit = _DERIVED.get((self.name, id(ann)))
        if hit is not None and hit[0] is ann:  # the entry holds ``ann``: the id is its own
            name, server, level, has_subjects = hit[1]
        else:
            name, server, level, has_subjects = _derive(self.name, ann)
            if len(_DERIVED) >= 4096:
                _DERIVED.clear()
            _DERIVED[(self.name, id(ann))] = (ann, (name, server, level, has_subjects))
        setattr_ = object.__setattr__
        setattr_(self, "name", name)
        setattr_(self, "mcp_server", server)
        setattr_(self, "level", level)
        setattr_(self, "has_subjects", has_subjects)

    def with_arguments(self, arguments: Mapping[str, Any]) -> ToolCall:
        """This call with other ``arguments`` (name, annotations and what is derived from
        them carried over, not derived again): the dispatcher's per-tool template."""
        new = object.__new__(ToolCall)
        _SET_NAME(new, self.name)
        _SET_ARGUMENTS(new, arguments)
        _SET_ANNOTATIONS(new, self.annotations)
        _SET_SERVER(new, self.mcp_server)
        _SET_LEVEL(new, self.level)
        _SET_SUBJECTS(new, self.has_subjects)
        return new


# the slots' own setters: a frozen dataclass refuses ``setattr``, and these are what
# ``object.__setattr__`` would reach, without its look-up
_SET_NAME = ToolCall.__dict__["name"].__set__
_SET_ARGUMENTS = ToolCall.__dict__["arguments"].__set__
_SET_ANNOTATIONS = ToolCall.__dict__["annotations"].__set__
_SET_SERVER = ToolCall.__dict__["mcp_server"].__set__
_SET_LEVEL = ToolCall.__dict__["level"].__set__
_SET_SUBJECTS = ToolCall.__dict__["has_subjects"].__set__


def _derive(raw: str, ann: ToolAnnotations) -> tuple[str, str | None, int, bool]:
    """``(canonical name, MCP server, level, has subjects)`` of a call to ``raw``."""
    name = canonical_name(raw)
    server = canonical_name(ann.mcp_server) if ann.mcp_server else None
    if server:
        prefix = server + "__"
        if not name.startswith(prefix):
            name = prefix + name
    else:
        head, sep, _ = name.partition("__")
        server = head if sep and head else None
    has_subjects = ann.argument_subjects or bool(ann.capabilities)
    return name, server, int(ann.effective_level), has_subjects


_DERIVED: dict[tuple[str, int], tuple[ToolAnnotations, tuple[str, str | None, int, bool]]] = {}
