"""Light commands stay light: checked through sys.modules, not a timer."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = (
    "pydantic",
    "rich",
    "openai",
    "anthropic",
    "mcp",
    "httpx",
    "tree_sitter",
    "wcmatch",
    "psycopg",
    "starlette",
    "uvicorn",
    "jinja2",
    "prometheus_client",
)
PACKAGES = (
    "charter.policy",
    "charter.agent",
    "charter.runtime",
    "charter.launch",
    "charter.manifest",
)

PROBE = """
import json, sys
from charter.cli import main
try:
    main({args!r})
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


@pytest.mark.parametrize(
    ("args", "forbidden"),
    [
        # answered from the command table: not even click (it costs more than python's start)
        (["--help"], (*HEAVY, *PACKAGES, "click")),
        (["-h"], (*HEAVY, *PACKAGES, "click")),
        (["--version"], (*HEAVY, *PACKAGES, "click")),
        (["policy", "--help"], HEAVY),
        # the runtime and run commands load only when used
        (["persona", "list", "--help"], (*HEAVY, "charter.runtime", "charter.run")),
    ],
)
def test_light_commands_import_nothing_heavy(args: list[str], forbidden: tuple[str, ...]) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(args=args)], capture_output=True, text=True, check=True
    )
    loaded = json.loads(proc.stderr.strip().splitlines()[-1])
    offenders = [m for m in loaded if any(m == h or m.startswith(h + ".") for h in forbidden)]
    assert offenders == []


def test_version_and_help_through_console_script() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "charter", "--version"], capture_output=True, text=True, check=True
    ).stdout
    from charter import __version__

    assert __version__ in out
    help_text = subprocess.run(
        [sys.executable, "-m", "charter", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "policy" in help_text and "Usage" in help_text


@pytest.mark.parametrize("columns", ["50", "80", "132"])
@pytest.mark.parametrize("flag", ["--help", "-h", "--version"])
def test_fast_answers_match_what_click_prints(flag: str, columns: str) -> None:
    """The click-free answers stay byte-identical to the click group's own."""
    import os

    env = {**os.environ, "COLUMNS": columns}
    fast = subprocess.run(
        [sys.executable, "-m", "charter", flag], capture_output=True, text=True, env=env
    )
    slow = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from charter.cli import cli; cli.main([{flag!r}], prog_name='charter')",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert (fast.returncode, fast.stdout, fast.stderr) == (0, slow.stdout, "")
    assert slow.returncode == 0


def test_gc_paused_gives_the_collector_back_as_it_found_it() -> None:
    import gc

    from charter.cli import gc_paused

    assert gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        assert not gc.isenabled()
        raise RuntimeError("a failing command")
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # the caller's choice stays
    finally:
        gc.enable()
