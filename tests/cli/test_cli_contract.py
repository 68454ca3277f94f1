"""One CLI contract everywhere (issue 31, README "Exit codes"), table-driven over every
command: under ``--json`` a usage error (an unknown option, a bad option value, a
missing argument) and every refusal is one JSON error object on stdout; an unknown
persona is exit 2 everywhere; a refusal is exit 1 everywhere. Through the real entry
point (``python -m charter``), as a script would run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from charter.cli._commands import COMMANDS

EXAMPLES = str(Path(__file__).parents[2] / "examples" / "personas")

# every command and sub-command, as a script names it (the top-level table is checked
# against charter's own list below, so a new command cannot be left out)
EVERY = {
    "policy": ["policy", "explain"],
    "demo": ["demo"],
    "persona": ["persona", "list"],
    "init": ["init"],
    "approve": ["approve"],
    "deny": ["deny"],
    "audit": ["audit"],
    "inbox": ["inbox", "list"],
    "serve": ["serve"],
    "console": ["console"],
    "launch": ["launch"],
    "print-policy": ["print-policy"],
    "print-overlay": ["print-overlay"],
    "which": ["which"],
    "recover": ["recover"],
    "doctor": ["doctor"],
}

PERSONA_SUB = [
    "check", "disable", "enable", "eval", "feedback", "inspect", "list", "pause", "promote",
    "resume", "rollout", "run", "schema", "spend", "status", "supervision", "tick", "trigger",
]  # fmt: skip

# commands that name a persona: (argv with {p}, whether they take --state-dir)
NAMES_A_PERSONA = {
    "status": (["persona", "status", "{p}"], True),
    "tick": (["persona", "tick", "{p}"], True),
    "trigger": (["persona", "trigger", "{p}", "--provider", "github", "--kind", "pr_opened",
                 "--metadata", "repository=a/b", "--metadata", "number=1"], True),
    "spend": (["persona", "spend", "{p}", "--cost-usd", "1"], True),
    "pause": (["persona", "pause", "{p}"], True),
    "resume": (["persona", "resume", "{p}"], True),
    "disable": (["persona", "disable", "{p}"], True),
    "enable": (["persona", "enable", "{p}"], True),
    "run": (["persona", "run", "{p}"], True),
    "inspect": (["persona", "inspect", "{p}"], False),
    "eval": (["persona", "eval", "{p}"], False),
    "rollout": (["persona", "rollout", "report", "{p}"], True),
    "promote": (["persona", "promote", "{p}", "--to", "suggest"], True),
    "feedback": (["persona", "feedback", "run_1", "--persona", "{p}", "--agree"], True),
}  # fmt: skip


def _charter(
    *argv: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "charter", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        check=False,
        env={**os.environ, **(env or {})},
    )


def _error(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    assert "Traceback" not in proc.stderr, proc.stderr
    data = json.loads(proc.stdout)
    error: dict[str, str] = data["error"]
    assert error["kind"] and error["message"]
    return error


def test_the_table_names_every_command() -> None:
    assert sorted(EVERY) == sorted(COMMANDS)


@pytest.mark.parametrize(
    "argv",
    [v for k, v in sorted(EVERY.items()) if k != "persona"]
    + [["persona", sub] for sub in PERSONA_SUB]
    + [
        ["persona", "rollout", "report"],
        ["persona", "supervision", "tail"],
        ["inbox", "show"],
        ["inbox", "ack"],
    ],
    ids=lambda argv: "-".join(argv),
)
def test_a_usage_error_under_json_is_one_json_object_exit_2(
    argv: list[str], tmp_path: Path
) -> None:
    proc = _charter(*argv, "--no-such-option", "--json", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    error = _error(proc)
    assert error["kind"] == "bad_input"  # (a missing argument may be named first)


@pytest.mark.parametrize("command", sorted(NAMES_A_PERSONA))
def test_an_unknown_persona_is_exit_2_everywhere(command: str, tmp_path: Path) -> None:
    template, stateful = NAMES_A_PERSONA[command]
    argv = [a.format(p="nobody") for a in template] + ["--manifest", EXAMPLES, "--json"]
    if stateful:
        argv += ["--state-dir", str(tmp_path / "state")]
    proc = _charter(*argv, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert _error(proc)["kind"] == "unknown_persona"


def test_bad_values_and_missing_arguments(tmp_path: Path) -> None:
    bad_llm = _charter(
        "persona", "run", "merge_captain", "--llm", "gpt-nonsense", "--json",
        "--manifest", EXAMPLES, "--state-dir", str(tmp_path / "state"), cwd=tmp_path,
    )  # fmt: skip
    assert bad_llm.returncode == 2 and "--llm" in _error(bad_llm)["message"]
    # refused before anything was recorded (it used to be a failed run in the log)
    assert not (tmp_path / "state").exists() or not list((tmp_path / "state").iterdir())
    from_env = _charter(
        "persona", "run", "merge_captain", "--json", "--manifest", EXAMPLES,
        "--state-dir", str(tmp_path / "state"), cwd=tmp_path, env={"CHARTER_LLM": "gpt-x"},
    )  # fmt: skip
    assert from_env.returncode == 2 and "$CHARTER_LLM" in _error(from_env)["message"]
    assert not (tmp_path / "state").exists() or not list((tmp_path / "state").iterdir())
    missing = _charter("persona", "status", "--json", cwd=tmp_path)
    assert missing.returncode == 2 and "NAME" in _error(missing)["message"]
    bad_int = _charter("serve", "--workers", "zero", "--json", cwd=tmp_path)
    assert bad_int.returncode == 2 and "--workers" in _error(bad_int)["message"]


def test_refusals_are_exit_1_and_json(tmp_path: Path) -> None:
    state = ["--state-dir", str(tmp_path / "state")]
    common = ["--manifest", EXAMPLES, *state, "--json"]
    unknown_call = _charter("approve", "run_404", "call_404", *state, "--json", cwd=tmp_path)
    assert unknown_call.returncode == 1, unknown_call.stdout + unknown_call.stderr
    assert _error(unknown_call)["kind"] == "refused"
    denied = _charter("deny", "run_404", "call_404", *state, "--json", cwd=tmp_path)
    assert denied.returncode == 1 and _error(denied)["kind"] == "refused"
    disabled = _charter("persona", "disable", "merge_captain", *common, cwd=tmp_path)
    assert disabled.returncode == 0, disabled.stdout + disabled.stderr
    # pausing a disabled persona changes nothing: a refusal like any other
    paused = _charter("persona", "pause", "merge_captain", *common, cwd=tmp_path)
    assert paused.returncode == 1, paused.stdout + paused.stderr
    assert json.loads(paused.stdout)["changed"] is False
