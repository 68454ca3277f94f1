"""Small helpers shared by CLI commands (output and error conventions)."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import click

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_DENIED = 3


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False))


def fail_input(message: str) -> NoReturn:
    """Report bad input on stderr (no traceback) and exit 2."""
    click.echo(f"error: {message}" if "\n" not in message else message, err=True)
    sys.exit(EXIT_BAD_INPUT)
