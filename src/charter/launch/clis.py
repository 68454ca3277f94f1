"""What charter knows about each external coding CLI: binary, overlay file, tools, flags.

Every fact here was observed with the real binaries (see ``docs/launch.md``): tool names
as they reach the model, which flags take values, which are variadic (and so swallow a
following prompt), and which user flags could override a policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from charter.policy import SideEffectLevel, ToolAnnotations, builtin_annotations

L = SideEffectLevel

#: Arity of a flag: no value, exactly one value, an optional value (only in ``=`` form or
#: when the next word is not an option), or variadic (every following non-option word).
NONE, ONE, OPTIONAL, VARIADIC = "none", "one", "optional", "variadic"


@dataclass(frozen=True, slots=True)
class Flag:
    """One command-line flag of a CLI, with all its spellings."""

    names: tuple[str, ...]
    arity: str = NONE
    #: The policy dimension that makes this flag policy-controlled when restricted
    #: (``any``: whenever a policy exists). ``None``: never filtered.
    controls: str | None = None
    #: For ``-c key=value`` style flags: the config keys (prefixes) that are controlled.
    controlled_keys: tuple[str, ...] = ()

    @property
    def canonical(self) -> str:
        return self.names[0]


@dataclass(frozen=True, slots=True)
class CliTool:
    """A tool a CLI offers its model, under the CLI's own name and charter's canonical one."""

    name: str
    canonical: str
    annotations: ToolAnnotations | None = None
    #: Offered by default (as observed); others appear only under conditions.
    default: bool = True

    def policy_annotations(self) -> ToolAnnotations:
        """Annotations the policy decides visibility with (catalog entry, else our own)."""
        if self.annotations is not None:
            return self.annotations
        found = builtin_annotations(self.canonical)
        return found if found is not None else ToolAnnotations()


@dataclass(frozen=True, slots=True)
class CliSpec:
    """One coding CLI."""

    name: str
    binary: str
    overlay_file: str
    version: str  # the version the facts were observed with (and the tests install)
    npm_package: str
    tools: tuple[CliTool, ...]
    flags: tuple[Flag, ...]
    subcommands: frozenset[str] = frozenset()
    mcp_prefix: str = ""  # how an MCP tool's name reaches the model: prefix + server + sep
    mcp_sep: str = "__"
    _by_name: dict[str, Flag] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for flag in self.flags:
            for name in flag.names:
                self._by_name[name] = flag

    def flag(self, name: str) -> Flag | None:
        """The flag spelled ``name`` (``--x``, ``-x``), if known."""
        return self._by_name.get(name)

    def tool(self, name: str) -> CliTool | None:
        return next((t for t in self.tools if t.name == name), None)

    def mcp_tool_name(self, server: str, tool: str) -> str:
        return f"{self.mcp_prefix}{server}{self.mcp_sep}{tool}"


def _ann(
    level: SideEffectLevel, kind: str = "other", path_args: tuple[str, ...] = ()
) -> ToolAnnotations:
    return ToolAnnotations(level, kind, path_args=path_args)


_PATHS = ("file_path", "path", "absolute_path", "dir_path")

CLAUDE = CliSpec(
    name="claude",
    binary="claude",
    overlay_file="CLAUDE.md",
    version="2.1.197",
    npm_package="@anthropic-ai/claude-code",
    mcp_prefix="mcp__",
    mcp_sep="__",
    tools=(
        CliTool("Agent", "task"),
        CliTool("Bash", "bash"),
        CliTool("CronCreate", "croncreate", _ann(L.NONE)),
        CliTool("CronDelete", "crondelete", _ann(L.NONE)),
        CliTool("CronList", "cronlist", _ann(L.NONE)),
        CliTool("Edit", "edit"),
        CliTool("EnterWorktree", "enterworktree", _ann(L.WORKSPACE_WRITE)),
        CliTool("ExitWorktree", "exitworktree", _ann(L.WORKSPACE_WRITE)),
        CliTool("NotebookEdit", "notebookedit"),
        CliTool("Read", "read"),
        CliTool("ReportFindings", "reportfindings", _ann(L.NONE)),
        CliTool("ScheduleWakeup", "schedulewakeup", _ann(L.NONE)),
        CliTool("SendMessage", "sendmessage", _ann(L.NONE)),
        CliTool("Skill", "skill"),
        CliTool("TaskCreate", "taskcreate", _ann(L.NONE, "think")),
        CliTool("TaskGet", "taskget", _ann(L.NONE, "think")),
        CliTool("TaskList", "tasklist", _ann(L.NONE, "think")),
        CliTool("TaskOutput", "taskoutput", _ann(L.READ_ONLY)),
        CliTool("TaskStop", "taskstop", _ann(L.PROCESS_EXEC)),
        CliTool("TaskUpdate", "taskupdate", _ann(L.NONE, "think")),
        CliTool("WebFetch", "webfetch"),
        CliTool("WebSearch", "websearch"),
        CliTool("Workflow", "workflow"),
        CliTool("Write", "write"),
        # Offered only when Bash is removed or when named in --tools.
        CliTool("Glob", "glob", default=False),
        CliTool("Grep", "grep", default=False),
    ),
    flags=(
        Flag(("--tools",), VARIADIC, "tools"),
        Flag(("--allowedTools", "--allowed-tools"), VARIADIC, "any"),
        Flag(("--disallowedTools", "--disallowed-tools"), VARIADIC, "any"),
        Flag(("--permission-mode",), ONE, "any"),
        Flag(("--dangerously-skip-permissions",), NONE, "any"),
        Flag(("--allow-dangerously-skip-permissions",), NONE, "any"),
        Flag(("--settings",), ONE, "any"),
        Flag(("--setting-sources",), ONE, "any"),
        Flag(("--mcp-config",), VARIADIC, "mcp_allow"),
        Flag(("--strict-mcp-config",), NONE),
        Flag(("--add-dir",), VARIADIC, "paths"),
        Flag(("--agents",), ONE, "tools"),
        Flag(("--agent",), ONE, "tools"),
        Flag(("--plugin-dir",), ONE, "any"),
        Flag(("--plugin-url",), ONE, "any"),
        Flag(("--file",), VARIADIC),
        Flag(("--betas",), VARIADIC),
        Flag(("--model",), ONE),
        Flag(("--fallback-model",), ONE),
        Flag(("--append-system-prompt",), ONE),
        Flag(("--system-prompt",), ONE),
        Flag(("--output-format",), ONE),
        Flag(("--input-format",), ONE),
        Flag(("--json-schema",), ONE),
        Flag(("--max-budget-usd",), ONE),
        Flag(("--session-id",), ONE),
        Flag(("--effort",), ONE),
        Flag(("--debug-file",), ONE),
        Flag(("--remote-control-session-name-prefix",), ONE),
        Flag(("-n", "--name"), ONE),
        Flag(("-d", "--debug"), OPTIONAL),
        Flag(("-r", "--resume"), OPTIONAL),
        Flag(("-w", "--worktree"), OPTIONAL),
        Flag(("--from-pr",), OPTIONAL),
        Flag(("--prompt-suggestions",), OPTIONAL),
        Flag(("--remote-control",), OPTIONAL),
        Flag(("--tmux",), OPTIONAL),
        Flag(("-p", "--print"), NONE),
        Flag(("-c", "--continue"), NONE),
    ),
)

CODEX = CliSpec(
    name="codex",
    binary="codex",
    overlay_file="AGENTS.md",
    version="0.169.0",
    npm_package="@openai/codex",
    mcp_prefix="mcp__",
    mcp_sep="__",
    subcommands=frozenset(
        {"exec", "e", "review", "resume", "fork", "apply", "a", "mcp", "sandbox", "cloud"}
    ),
    tools=(
        CliTool("exec_command", "bash"),
        CliTool("write_stdin", "bash"),
        CliTool("request_user_input", "askuserquestion"),
        CliTool("view_image", "view_image", _ann(L.READ_ONLY, "read", path_args=("path",))),
        CliTool("multi_agent_v1", "task"),
        CliTool("goals", "goals", _ann(L.NONE, "think")),
        CliTool("web_search", "websearch"),
    ),
    flags=(
        Flag(
            ("-c", "--config"),
            ONE,
            "any",
            controlled_keys=(
                "sandbox_mode",
                "sandbox_workspace_write",
                "approval_policy",
                "web_search",
                "features",
                "tools",
                "mcp_servers",
                "permissions",
                "default_permissions",
                # a profile brings keys the translation does not pin (MCP servers,
                # writable roots, features): codex 0.169 refuses these legacy forms, and
                # --profile NAME (NAME.config.toml in CODEX_HOME) is filtered below
                "profile",
                "profiles",
            ),
        ),
        Flag(("-s", "--sandbox"), ONE, "any"),
        Flag(("-a", "--ask-for-approval"), ONE, "any"),
        Flag(("--dangerously-bypass-approvals-and-sandbox", "--yolo"), NONE, "any"),
        Flag(("--full-auto",), NONE, "any"),
        Flag(("--approve-for-me",), NONE, "any"),
        Flag(("--enable",), ONE, "any"),
        Flag(("--disable",), ONE),
        Flag(("--search",), NONE, "any"),
        Flag(("--add-dir",), ONE, "paths"),
        Flag(("-i", "--image"), VARIADIC),
        Flag(("-m", "--model"), ONE),
        Flag(("-p", "--profile"), ONE, "any"),
        Flag(("-C", "--cd"), ONE),
        Flag(("--local-provider",), ONE),
        Flag(("--remote",), ONE, "any"),
        Flag(("--remote-auth-token-env",), ONE),
        Flag(("--output-schema",), ONE),
        Flag(("--color",), ONE),
        Flag(("-o", "--output-last-message"), ONE),
    ),
)

GEMINI = CliSpec(
    name="gemini",
    binary="gemini",
    overlay_file="GEMINI.md",
    version="0.61.0",
    npm_package="@google/gemini-cli",
    mcp_prefix="mcp_",
    mcp_sep="_",
    subcommands=frozenset({"mcp", "extensions", "extension", "skills", "skill", "hooks", "hook"}),
    tools=(
        CliTool("list_directory", "ls", _ann(L.READ_ONLY, "read", path_args=_PATHS)),
        CliTool("read_file", "read", _ann(L.READ_ONLY, "read", path_args=_PATHS)),
        CliTool("grep_search", "grep"),
        CliTool("glob", "glob"),
        CliTool("google_web_search", "websearch"),
        CliTool("web_fetch", "webfetch"),
        CliTool("replace", "edit"),
        CliTool("write_file", "write"),
        CliTool("run_shell_command", "bash"),
        CliTool("list_background_processes", "bash"),
        CliTool("read_background_output", "bash"),
        CliTool("update_topic", "update_topic", _ann(L.NONE, "think")),
        CliTool("enter_plan_mode", "enter_plan_mode", _ann(L.NONE, "switch_mode")),
        CliTool("invoke_agent", "task"),
        CliTool("activate_skill", "skill"),
    ),
    flags=(
        Flag(("-y", "--yolo"), NONE, "any"),
        Flag(("--approval-mode",), ONE, "any"),
        Flag(("--admin-policy",), VARIADIC, "any"),
        Flag(("--policy",), VARIADIC),
        Flag(("--allowed-mcp-server-names",), VARIADIC, "mcp_servers"),
        Flag(("--allowed-tools",), VARIADIC, "any"),
        Flag(("-e", "--extensions"), VARIADIC, "any"),
        Flag(("--include-directories",), VARIADIC, "paths"),
        Flag(("-m", "--model"), ONE),
        Flag(("-p", "--prompt"), ONE),
        Flag(("-i", "--prompt-interactive"), ONE),
        Flag(("-o", "--output-format"), ONE),
        Flag(("-w", "--worktree"), OPTIONAL),
        Flag(("-r", "--resume"), ONE),
        Flag(("--session-file",), ONE),
        Flag(("--session-id",), ONE),
        Flag(("--delete-session",), ONE),
        Flag(("-s", "--sandbox"), NONE),
        Flag(("--skip-trust",), NONE),
        Flag(("-d", "--debug"), NONE),
    ),
)

OPENCODE = CliSpec(
    name="opencode",
    binary="opencode",
    overlay_file="AGENTS.md",
    version="1.18.33",
    npm_package="opencode-ai",
    mcp_prefix="",
    mcp_sep="_",
    subcommands=frozenset({"run", "serve", "web", "mcp", "agent", "models", "auth", "acp"}),
    tools=(
        CliTool("bash", "bash"),
        CliTool("edit", "edit"),
        CliTool("write", "write"),
        CliTool("read", "read"),
        CliTool("glob", "glob"),
        CliTool("grep", "grep"),
        CliTool("list", "ls", _ann(L.READ_ONLY, "read", path_args=_PATHS), default=False),
        CliTool("skill", "skill"),
        CliTool("task", "task"),
        CliTool("todowrite", "todowrite"),
        CliTool("todoread", "todoread", _ann(L.NONE, "think"), default=False),
        CliTool("webfetch", "webfetch"),
        CliTool("websearch", "websearch", default=False),
    ),
    flags=(
        Flag(("--auto",), NONE, "any"),
        Flag(("--agent",), ONE, "any"),
        Flag(("--attach",), ONE, "any"),
        Flag(("-m", "--model"), ONE),
        Flag(("-s", "--session"), ONE),
        Flag(("--format",), ONE),
        Flag(("-f", "--file"), VARIADIC),
        Flag(("--title",), OPTIONAL),
        Flag(("-p", "--password"), ONE),
        Flag(("-u", "--username"), ONE),
        Flag(("--dir",), ONE),
        Flag(("--port",), OPTIONAL),
        Flag(("--variant",), ONE),
        Flag(("--command",), ONE),
        Flag(("--log-level",), ONE),
    ),
)

CLIS: dict[str, CliSpec] = {c.name: c for c in (CLAUDE, CODEX, GEMINI, OPENCODE)}
ALIASES = {"claude-code": "claude", "gemini-cli": "gemini", "open-code": "opencode"}


def get_cli(name: str) -> CliSpec | None:
    """The spec of a CLI by name or alias (``claude-code`` is ``claude``)."""
    key = name.strip().lower()
    return CLIS.get(ALIASES.get(key, key))
