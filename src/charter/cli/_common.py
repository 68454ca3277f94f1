"""Small helpers shared by CLI commands (output and error conventions)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_DENIED = 3

#: True when charter is the whole process (the console script, not ``main([...])`` or a
#: test runner): a command may then end it without interpreter teardown.
OWNS_PROCESS = False


def global_manifest(given: Path | None) -> Path | None:
    """``given``, else a ``--manifest`` given before the sub-command (``charter --manifest F``)."""
    if given is not None:
        return given
    ctx = click.get_current_context(silent=True)
    chosen = ctx.meta.get("charter.manifest") if ctx is not None else None
    return Path(chosen) if isinstance(chosen, str) else None


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False))


def json_requested() -> bool:
    """Whether the running command was given ``--json`` (so its errors are JSON too)."""
    ctx = click.get_current_context(silent=True)
    while ctx is not None:
        if ctx.params.get("as_json"):
            return True
        ctx = ctx.parent
    return False


def emit_error(kind: str, message: str, **extra: Any) -> None:
    """The ``--json`` error contract: one object ``{"error": {"kind", "message", ...}}``."""
    emit_json({"error": {"kind": kind, "message": message, **extra}})


def fail(
    message: str,
    code: int = EXIT_FAILED,
    *,
    as_json: bool = False,
    kind: str | None = None,
    **extra: Any,
) -> NoReturn:
    """Report an error (stderr, or one JSON object on stdout under ``--json``) and exit.

    Under ``--json`` (given here or to the running command) the error is
    ``{"error": {"kind", "message", ...}}`` on stdout; ``kind`` defaults to ``bad_input``
    for exit 2 and ``refused`` otherwise.
    """
    if as_json or json_requested():
        kind = kind or ("bad_input" if code == EXIT_BAD_INPUT else "refused")
        emit_error(kind, message, **extra)
    else:
        click.echo(f"error: {message}", err=True)
    sys.exit(code)


def check_llm(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """``--llm``: a provider name charter knows (``mock``, ``mock:SCRIPT.json``,
    ``openai``, ...); anything else is bad input (exit 2) before any run is recorded, not
    a failed run. (A mock script's path is resolved where the run reads it.)"""
    if value is None:
        return None
    from charter.agent.providers import PROVIDER_NAMES

    name, sep, arg = value.partition(":")
    if name not in PROVIDER_NAMES:
        raise click.BadParameter(
            f"unknown provider {value!r}; expected one of {', '.join(PROVIDER_NAMES)} "
            "(mock:SCRIPT.json for a scripted mock)"
        )
    if sep and name != "mock":
        raise click.BadParameter(f"{name} takes no argument (got {value!r})")
    if name == "mock" and sep and not arg:
        raise click.BadParameter("mock: needs a script path (mock:SCRIPT.json)")
    return value


def llm_from_env(given: str | None) -> str | None:
    """``--llm``, else ``$CHARTER_LLM`` checked as ``--llm`` is (bad input, exit 2)."""
    import os

    if given is not None:
        return given
    value = os.environ.get("CHARTER_LLM") or None
    if value is None:
        return None
    from charter.agent.providers import PROVIDER_NAMES

    name, sep, arg = value.partition(":")
    if (
        name not in PROVIDER_NAMES
        or (sep and name != "mock")
        or (name == "mock" and sep and not arg)
    ):
        fail(
            f"$CHARTER_LLM: unknown provider {value!r}; expected one of "
            f"{', '.join(PROVIDER_NAMES)} (mock:SCRIPT.json for a scripted mock)",
            EXIT_BAD_INPUT,
        )
    return value


def read_json_object(path: Path, option: str) -> dict[str, Any]:
    """A JSON object from ``path`` (``-`` is stdin), or a bad-input error naming ``option``."""
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        fail(f"{option}: cannot read JSON from {path}: {exc}", EXIT_BAD_INPUT)
    if not isinstance(data, dict):
        fail(f"{option}: expected a JSON object", EXIT_BAD_INPUT)
    return data


def fail_input(message: str, *, as_json: bool = False, **extra: Any) -> NoReturn:
    """Report bad input (stderr, or JSON on stdout under ``--json``; no traceback), exit 2."""
    if as_json or json_requested():
        emit_error("bad_input", message, **extra)
    else:
        click.echo(f"error: {message}" if "\n" not in message else message, err=True)
    sys.exit(EXIT_BAD_INPUT)
