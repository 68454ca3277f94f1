"""Each turn's request, and what it shows the model besides the messages: the tools and
the system prompt.

These are methods of the loop's run (``_Run``), kept here so the loop stays readable.
Each turn asks for them, and between two turns they almost never change, so each is
rebuilt only when something it derives from changed: the policy stack (an immutable
tuple: a pushed frame makes a new one), the tools, the narrowed set, the prompt's parts.
"""

from __future__ import annotations

from typing import Any

from charter.policy import ToolCall, current_stack, decide_current_visibility

from .providers.base import LlmRequest, new_request
from .textmode import tool_contract
from .tools import Tool


def next_request(run: Any, iteration: int, all_tools: list[Tool]) -> LlmRequest:
    """The request of turn ``iteration``: the visible tools, the system prompt, the
    prompt messages, and the options and model (``post_turn_callback``'s ``next_options``
    for this turn only)."""
    cfg = run.cfg
    tools = [] if cfg.fmt == "none" else run.visible_tools(all_tools)
    system = run.effective_system(tools)
    messages, system = run.prompt_messages(iteration, system)
    llm_options = {**cfg.llm_options, **run.next_llm_options}
    run.next_llm_options = {}
    if cfg.output_schema is not None:  # providers lower it to native structured output
        llm_options["output_schema"] = cfg.output_schema.native()
    model, run.next_model = run.next_model or cfg.model, None
    return new_request(
        model,
        system,
        messages,
        run.tool_schemas(tools) if cfg.fmt == "native" else [],
        llm_options.pop("tool_choice", None),
        llm_options,
    )


def loop_contract(fmt: str, sentinel: str | None) -> str:
    """The system-prompt line that tells a loop-until-done model how to finish."""
    from .textmode import DEFAULT_SENTINEL

    if fmt == "native" and not sentinel:
        how = "complete by returning final text with no tool calls"
    elif fmt == "text":
        how = f"write <done>{sentinel or DEFAULT_SENTINEL}</done> only when the task is complete"
    else:
        how = f"write {sentinel or DEFAULT_SENTINEL} only when the task is complete"
    return f"IMPORTANT: You MUST keep working until the task is complete. When done, {how}."


def effective_system(run: Any, tools: list[Tool]) -> str | None:
    """The system prompt of the next request: the caller's, then the loop contract, the
    text-mode tool contract, active skills, the scope block and hooks' fragments."""
    cfg = run.cfg
    if not (
        cfg.loop_until_done
        or cfg.fmt == "text"
        or run.active_skills
        or cfg.scope is not None
        or run.system_tail
        or cfg.output_schema is not None
    ):
        return run.system or None  # the caller's prompt alone (what joining it gives)
    parts = [run.system] if run.system else []
    prompts = cfg.prompts  # agent.* overrides (charter.agent.prompts)
    if cfg.loop_until_done:
        contract = loop_contract(cfg.fmt, cfg.sentinel)
        parts.append(
            prompts.render("agent.loop_contract", contract, fmt=cfg.fmt, sentinel=cfg.sentinel)
        )
    if cfg.fmt == "text" and tools:
        schemas = [t.schema() for t in tools]
        text = tool_contract(schemas, cfg.sentinel)
        parts.append(
            prompts.render("agent.tool_contract_text", text, tools=schemas, sentinel=cfg.sentinel)
        )
    for skill in run.active_skills:
        parts.append(f'<skill name="{skill.name}">\n{skill.prompt}\n</skill>')
    if cfg.scope is not None:
        block = cfg.scope.prompt_block()
        if block:
            parts.append(block)
    if cfg.output_schema is not None:
        parts.append(cfg.output_schema.instruction())
    parts.extend(v for v in run.system_tail.values() if v)
    return "\n\n".join(parts) if parts else None


def visible_tools(run: Any, tools: list[Tool]) -> list[Tool]:
    """The tool surface the model sees: tools the active stack may offer, by the same
    visibility decision launch uses (name, MCP server and side-effect level, see
    :func:`charter.policy.decide_visibility`): a tool above the level ceiling is not
    offered only to be denied. Hiding is not enforcing: every call is still decided at
    dispatch, arguments included.

    Recomputed only when the stack (the same tuple object until a frame is pushed or
    popped), the tools (by identity) or the narrowed set changed; turns in between reuse it.
    """
    stack = current_stack()
    hidden = run.hidden_tools
    cached = run._visible
    if (
        cached is not None
        and cached[0] is stack
        and cached[2] == hidden
        and cached[1] == tuple(map(id, tools))
    ):
        return cached[3]  # type: ignore[no-any-return]
    visible = [
        t
        for t in tools
        if t.name.lower() not in hidden
        and decide_current_visibility(ToolCall(t.name, {}, t.annotations)).allowed
    ]
    run._visible = (stack, tuple(map(id, tools)), frozenset(hidden), visible)
    run._schemas = None
    return visible


def tool_schemas(run: Any, tools: list[Tool]) -> list[dict[str, Any]]:
    """The request's ``tools``: each visible tool's :meth:`~Tool.schema`, built once per
    surface (``tools`` is what :func:`visible_tools` returned) and shared by the requests
    that show it, each in a list of its own. Providers read them and never write them."""
    cached = run._schemas
    if cached is None or cached[0] is not tools:
        cached = (tools, [t.schema() for t in tools])
        run._schemas = cached
    return list(cached[1])
