"""Property: the programs charter.policy judges in a command line are the programs that run.

Random command lines are built from a grammar of wrappers (``env``, ``nice``, ``timeout``,
``nohup``, ``stdbuf``, ``xargs``, ``command``, ``time``, ``bash -c``), redirections placed
anywhere in a command, environment prefixes, pipes and lists; each is run by the shell the
``bash`` tool runs (``bash --noprofile --norc -c``) under ``strace -f -e trace=execve``,
and the set of programs successfully executed must equal the set
:func:`charter.policy.parse_command_line` returns (bash built-ins aside: they run no
program). Every program in the grammar is harmless and succeeds, so every part runs.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from charter.policy import CommandParseError, parse_command_line

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")

# Programs that exist on any Debian-like system, with arguments that make them succeed.
PROGRAMS = [
    ["cat", "/dev/null"],
    ["ls", "/"],
    ["head", "-c0", "/dev/null"],
    ["wc", "-c", "/dev/null"],
    ["uname"],
    ["id", "-u"],
    ["date", "+%s"],
    ["basename", "x"],
    ["sort", "/dev/null"],
]
WRAPPERS = [
    ["env"],
    ["env", "A=1"],
    ["nice"],
    ["nice", "-n", "5"],
    ["timeout", "5"],
    ["timeout", "-s", "KILL", "5"],
    ["nohup"],
    ["stdbuf", "-o0"],
    ["xargs"],
]
# Shell built-ins that run the command after them: outermost only (no program to exec).
BUILTIN_WRAPPERS = [["command"], ["command", "-p"]]
REDIRECTS = [">/dev/null", "2>&1", "2>/dev/null", "</dev/null", "<<<x", ">>/dev/null"]
ENV_PREFIXES = ["A=1", "LC_ALL=C", "B=two"]
BASH_BUILTINS = frozenset({"command"})
CLEAN_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


@st.composite
def simple_command(draw: st.DrawFn, depth: int = 0, anywhere: bool = True) -> str:
    words = list(draw(st.sampled_from(PROGRAMS)))
    for wrapper in draw(st.lists(st.sampled_from(WRAPPERS), max_size=3)):
        words = [*wrapper, *words]
    if depth < 1 and draw(st.booleans()):
        inner = draw(command_line(depth + 1, anywhere))
        words = [*draw(st.sampled_from([["bash", "-c"], ["env", "bash", "-c"]])), inner]
    if draw(st.booleans()):
        words = [*draw(st.sampled_from(BUILTIN_WRAPPERS)), *words]
    quoted = [shlex.quote(w) for w in words]
    for redirect in draw(st.lists(st.sampled_from(REDIRECTS), max_size=2)):
        # A redirection may stand anywhere after the first word (``cat >f /dev/null``).
        at = draw(st.integers(min_value=1, max_value=len(quoted))) if anywhere else len(quoted)
        quoted.insert(at, redirect)
    prefixes = draw(st.lists(st.sampled_from(ENV_PREFIXES), max_size=2))
    return " ".join([*prefixes, *quoted])


@st.composite
def command_line(draw: st.DrawFn, depth: int = 0, anywhere: bool = True) -> str:
    parts = draw(st.lists(simple_command(depth, anywhere), min_size=1, max_size=3))
    line = parts[0]
    for part in parts[1:]:
        line += draw(st.sampled_from([" ; ", " | ", "\n"])) + part
    return line


def executed(line: str, scratch: Path) -> set[str]:
    """Basenames of every program execve'd successfully by ``bash -c line`` (bar bash itself)."""
    out = scratch / "trace"
    subprocess.run(
        [
            "strace",
            "-f",
            "-ff",
            "-z",
            "-qq",
            "-e",
            "trace=execve",
            "-e",
            "signal=none",
            "-o",
            str(out),
            "bash",
            "--noprofile",
            "--norc",
            "-c",
            line,
        ],
        cwd=scratch,
        env=CLEAN_ENV,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=30,
        check=False,
    )
    programs: list[str] = []
    for file in scratch.glob("trace.*"):
        text = file.read_text()
        calls = re.findall(r'^execve\("([^"]+)"', text, re.M)
        # the shell the test started: found by its arguments, not by the lowest pid
        # (pids wrap around on a busy machine, so a child can have a lower one)
        first = text.split("\n", 1)[0]
        if calls and '"--noprofile", "--norc", "-c"' in first:
            calls = calls[1:]
        programs += [os.path.basename(c) for c in calls]
        file.unlink()
    return set(programs)


def judged(line: str) -> set[str] | None:
    """The programs the policy judges, or None when it refuses the line as unparseable."""
    try:
        commands = parse_command_line(line)
    except CommandParseError:
        return None
    return {c.program for c in commands if c.program and c.program not in BASH_BUILTINS}


SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def check(line: str) -> None:
    programs = judged(line)
    assume(programs is not None)  # a line the policy cannot parse is refused: nothing runs
    with tempfile.TemporaryDirectory() as tmp:
        assert programs == executed(line, Path(tmp)), line


@SETTINGS
@given(line=command_line(anywhere=False))
def test_programs_judged_are_programs_executed(line: str) -> None:
    check(line)


@SETTINGS
@given(line=command_line(anywhere=True))
def test_programs_judged_are_programs_executed_redirects_anywhere(line: str) -> None:
    check(line)


@pytest.mark.parametrize(
    "line",
    [
        "cat >/dev/null /dev/null",
        "A=1 timeout 5 env nice -n 5 ls /",
        "bash -c 'uname; id -u | xargs basename'",
        "ls / | xargs -0 stdbuf -o0 cat /dev/null",
        "command -p nohup sort /dev/null 2>&1",
    ],
)
def test_examples(line: str, tmp_path: Path) -> None:
    assert judged(line) == executed(line, tmp_path)
