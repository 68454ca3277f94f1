"""git's executing options, in every spelling git's option parser accepts (issue 29)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from charter.policy import Frame, Policy, ToolCall, builtin_annotations, decide
from charter.policy.git_exec import _EXEC_OPTIONS

FRAMES = [Frame(Policy.from_dict({"commands": {"allow": ["git:*", "make:*"]}}), "p", "persona")]

#: (subcommand, option, how) for every option that runs a command line.
SHELL_OPTIONS = [
    (sub, option, how)
    for sub, table in _EXEC_OPTIONS.items()
    for option, how in table.items()
    if how in ("sh", "sh?")
]


def allowed(line: str) -> bool:
    call = ToolCall("bash", {"command": line}, builtin_annotations("bash"))
    return decide(call, FRAMES).allowed


@st.composite
def spelled(draw: Any, program: str) -> str:
    """A git line giving ``program`` to one executing option, spelled as git accepts it."""
    sub, option, how = draw(st.sampled_from(SHELL_OPTIONS))
    value = f"'{program} x'"
    if option.startswith("--"):
        cut = draw(st.integers(min_value=3, max_value=len(option)))
        name = option[:cut]  # git takes any unambiguous prefix of a long option
        form = "=" if how == "sh?" else draw(st.sampled_from(["=", " "]))
        opt = f"{name}{form}{value}"
    else:
        flags = draw(st.sampled_from(["", "n", "q"]))  # a cluster before the letter
        attached = how == "sh?" or draw(st.booleans())
        opt = f"-{flags}{option[1]}{value}" if attached else f"-{flags}{option[1]} {value}"
    before = draw(st.sampled_from(["", "-C . ", "--no-pager ", "-p "]))
    return f"git {before}{sub} {opt} arg"


@settings(max_examples=300, deadline=None)
@given(spelled("curl"))
def test_an_executing_option_is_judged_as_the_program_it_runs(line: str) -> None:
    assert not allowed(line), line


@settings(max_examples=150, deadline=None)
@given(spelled("make"))
def test_the_same_option_running_an_allowed_program_is_allowed(line: str) -> None:
    assert allowed(line), line


def test_plain_git_and_lookalike_options_stay_allowed() -> None:
    for line in [
        "git log --oneline -n 5",
        "git grep -n -e pattern",
        "git rebase --reschedule-failed-exec HEAD~1",
        "git fetch origin",
        "git config --get user.name",
        "git submodule update --init",
        "git bisect start",
    ]:
        assert allowed(line), line
    for line in [
        "git config -f x alias.y '!make'",
        "git -c core.pager=make log",
        "git clone --template=t u",
        "git mergetool",
        "git grep -O x",
    ]:
        assert not allowed(line), line
