"""Annotations of well-known tools (the canonical names of the coding CLIs and charter's own).

A tool that is not in this catalog and declares nothing is treated as the most
dangerous kind (side-effect level ``network``).
"""

from __future__ import annotations

from .call import ToolAnnotations
from .levels import SideEffectLevel as L

_PATHS = ("file_path", "path", "paths", "notebook_path")

BUILTIN_TOOLS: dict[str, ToolAnnotations] = {
    "bash": ToolAnnotations(L.PROCESS_EXEC, "execute", command_args=("command",)),
    "shell": ToolAnnotations(L.PROCESS_EXEC, "execute", command_args=("command",)),
    "read": ToolAnnotations(L.READ_ONLY, "read", path_args=_PATHS),
    "ls": ToolAnnotations(L.READ_ONLY, "read", path_args=_PATHS),
    "glob": ToolAnnotations(L.READ_ONLY, "search", path_args=_PATHS),
    "grep": ToolAnnotations(L.READ_ONLY, "search", path_args=_PATHS),
    "write": ToolAnnotations(L.WORKSPACE_WRITE, "edit", path_args=_PATHS),
    "edit": ToolAnnotations(L.WORKSPACE_WRITE, "edit", path_args=_PATHS),
    "multiedit": ToolAnnotations(L.WORKSPACE_WRITE, "edit", path_args=_PATHS),
    "notebookedit": ToolAnnotations(L.WORKSPACE_WRITE, "edit", path_args=_PATHS),
    "webfetch": ToolAnnotations(L.NETWORK, "fetch", url_args=("url",)),
    "websearch": ToolAnnotations(L.NETWORK, "fetch"),
    "task": ToolAnnotations(L.NONE, "delegate", member_args=("subagent_type",)),
    "delegate": ToolAnnotations(L.NONE, "delegate", member_args=("member", "agent")),
    "skill": ToolAnnotations(L.NONE, "other", skill_args=("name", "skill")),
    "todowrite": ToolAnnotations(L.NONE, "think"),
    "askuserquestion": ToolAnnotations(L.NONE, "other"),
    "ask_user": ToolAnnotations(L.NONE, "other"),
    "recall": ToolAnnotations(L.READ_ONLY, "other"),
    "memory": ToolAnnotations(L.READ_ONLY, "other"),
    "remember": ToolAnnotations(L.WORKSPACE_WRITE, "other"),
    "forget": ToolAnnotations(L.WORKSPACE_WRITE, "other"),
}


def builtin_annotations(name: str) -> ToolAnnotations | None:
    """The catalog entry for ``name`` (case-insensitive), if any."""
    return BUILTIN_TOOLS.get(name.strip().lower())
