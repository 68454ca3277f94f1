"""charter.agent: the agent loop, tools, providers and MCP, with enforced scoping.

Every tool dispatch (MCP tools, skill activation and delegation included) is decided by
:mod:`charter.policy` against the active policy stack before any handler runs.
"""

from __future__ import annotations

from .approvals import PermissionRequest
from .audit import AuditSinkHook
from .builtins import builtin_tools
from .callers import (
    CircuitBreaker,
    compose,
    default_llm_caller,
    with_circuit_breaker,
    with_dry_run,
    with_escalation,
    with_fallback,
    with_rate_limit,
    with_retry,
)
from .chat import agent_chat_loop, agent_chat_route_input
from .daemon import (
    DaemonHandle,
    DaemonQueueFull,
    daemon_resume,
    daemon_snapshot,
    daemon_spawn,
    daemon_stop,
    daemon_trigger,
)
from .delegation import Skill, delegate_tool, skill_tool
from .dispatch import Dispatcher, ToolOutcome
from .hooks import CombinedHooks, LoopHook
from .loop import agent_loop, agent_loop_async, agent_turn, agent_turn_async
from .options import PROFILES, AgentOptionError, IterationBudget
from .presets import (
    PRESETS,
    agent_budget,
    agent_preset,
    audit_agent,
    merge_captain_agent,
    oncall_captain_agent,
    release_captain_agent,
    repair_agent,
    review_captain_agent,
    summary_agent,
    verify_agent,
)
from .providers import (
    LlmRequest,
    LlmResponse,
    MockProvider,
    Provider,
    ProviderError,
    ToolCallRequest,
    get_provider,
)
from .reminders import agent_system_reminder
from .result import STATUSES, AgentResult, LlmStats, ToolStats, TurnResult
from .scoping import PersonaRun, Stage, current_persona_run, persona, persona_stages, step
from .sessions import (
    SessionStore,
    agent_session_clear_scratchpad,
    agent_session_delete,
    agent_session_exists,
    agent_session_messages,
    agent_session_queue_message,
    agent_session_scratchpad,
    agent_session_seed_from_jsonl,
    agent_session_set_scratchpad,
)
from .simusers import (
    agentic_user,
    fixture_user,
    scripted_user,
    simulated_user_post_turn,
    simulated_user_read_tools,
    user_tools,
)
from .skills import SkillMatch, SkillRegistry, skill_define, skill_registry
from .snapshots import load_snapshot, resume_agent, suspend_agent
from .subagents import (
    SubAgentRequest,
    TokenLedger,
    sub_agent_request,
    sub_agent_run,
    sub_agent_run_async,
    sub_agent_tool,
    sub_agent_transcript,
)
from .suspension import agent_await_resumption, parse_resume_conditions
from .tools import Tool, make_tool, tool
from .workers import (
    WorkerPool,
    agent_lifecycle_tools,
    agent_stop,
    close_agent,
    list_agents,
    send_input,
    spawn_agent,
    wait_agent,
)

__all__ = [
    "agent_system_reminder",
    "agent_await_resumption",
    "parse_resume_conditions",
    "agent_chat_loop",
    "agent_chat_route_input",
    "DaemonHandle",
    "DaemonQueueFull",
    "daemon_resume",
    "daemon_snapshot",
    "daemon_spawn",
    "daemon_stop",
    "daemon_trigger",
    "PermissionRequest",
    "AuditSinkHook",
    "SessionStore",
    "agent_session_clear_scratchpad",
    "agent_session_delete",
    "agent_session_exists",
    "agent_session_messages",
    "agent_session_queue_message",
    "agent_session_scratchpad",
    "agent_session_seed_from_jsonl",
    "agent_session_set_scratchpad",
    "agentic_user",
    "fixture_user",
    "scripted_user",
    "simulated_user_post_turn",
    "simulated_user_read_tools",
    "user_tools",
    "PRESETS",
    "agent_budget",
    "agent_preset",
    "audit_agent",
    "merge_captain_agent",
    "oncall_captain_agent",
    "release_captain_agent",
    "repair_agent",
    "review_captain_agent",
    "summary_agent",
    "verify_agent",
    "PROFILES",
    "STATUSES",
    "AgentOptionError",
    "AgentResult",
    "CombinedHooks",
    "Dispatcher",
    "IterationBudget",
    "LoopHook",
    "LlmRequest",
    "LlmResponse",
    "LlmStats",
    "MockProvider",
    "PersonaRun",
    "Provider",
    "ProviderError",
    "Skill",
    "SkillMatch",
    "SkillRegistry",
    "Stage",
    "SubAgentRequest",
    "TokenLedger",
    "Tool",
    "ToolCallRequest",
    "ToolOutcome",
    "ToolStats",
    "TurnResult",
    "WorkerPool",
    "agent_lifecycle_tools",
    "agent_loop",
    "agent_stop",
    "agent_loop_async",
    "agent_turn",
    "agent_turn_async",
    "builtin_tools",
    "close_agent",
    "CircuitBreaker",
    "compose",
    "current_persona_run",
    "default_llm_caller",
    "delegate_tool",
    "get_provider",
    "list_agents",
    "load_snapshot",
    "make_tool",
    "persona",
    "persona_stages",
    "resume_agent",
    "send_input",
    "skill_define",
    "spawn_agent",
    "skill_registry",
    "skill_tool",
    "step",
    "sub_agent_request",
    "sub_agent_run",
    "sub_agent_run_async",
    "sub_agent_tool",
    "sub_agent_transcript",
    "suspend_agent",
    "tool",
    "wait_agent",
    "with_fallback",
    "with_circuit_breaker",
    "with_dry_run",
    "with_escalation",
    "with_rate_limit",
    "with_retry",
]
