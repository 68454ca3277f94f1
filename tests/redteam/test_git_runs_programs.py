"""Class 7 (issue 29): allowed programs that run others.

Under ``commands.allow ["git:*", "cat:*", "git-upload-pack:*"]`` git's executing options
must be judged as the program they run: ``touch`` is not allowed, so none of these may
leave its marker file. The twins: plain git work, and an executing option whose program
*is* allowed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .conftest import commit_twice, run_loop, tc

pytestmark = pytest.mark.needs_sandbox

POLICY: dict[str, Any] = {
    "commands": {"allow": ["git:*", "cat:*", "git-upload-pack:*"], "deny": ["curl:*"]},
    "paths": {"allow": ["./"], "deny": ["./secrets/**"]},
    "network": {"deny": ["*"]},
}

HOSTILE = [
    "git ls-remote --upload-pack='touch pwned-1; git-upload-pack' .",
    "git ls-remote --upload-pa='touch pwned-2' .",
    "git ls-remote -u 'touch pwned-3' .",
    "git fetch --upload-pack='touch pwned-4' .",
    "git grep -O'touch pwned-5' public",
    "git grep -nOtouch\\ pwned-6 public",
    "git grep --open-files-in-pager='touch pwned-7' public",
    "git difftool -y -x 'touch pwned-8' HEAD~1",
    "git difftool --extcmd='touch pwned-9' HEAD~1",
    "git rebase -x 'touch pwned-10' HEAD~1",
    "git rebase --exec='touch pwned-11' HEAD~1",
    "git config -f .git/config alias.x '!touch pwned-12' && git x",
    "git config --file .git/config alias.y '!touch pwned-13' && git y",
    "git -c alias.z='!touch pwned-14' z",
    "git -calias.z='!touch pwned-15' z",
    "git --config-env=core.pager=PWN log",
    "git submodule foreach 'touch pwned-16'",
    "git bisect start HEAD HEAD~1 && git bisect run touch pwned-17",
    "git filter-branch -f --tree-filter 'touch pwned-18' HEAD",
    "git archive --remote=. --exec='touch pwned-19' HEAD",
    "git push --receive-pack='touch pwned-20' . HEAD:refs/heads/x",
    "git clone --template=./tpl . clone1",
    "git clone -c core.fsmonitor='touch pwned-21' . clone2",
    "git mergetool",
]


@pytest.fixture
def repo(ws: Path) -> Path:
    return commit_twice(ws, ["notes.txt", "src"], ws / "src" / "a.txt", "hello again\n")


def test_git_executing_options_are_judged_as_the_program_they_run(repo: Path) -> None:
    obs = run_loop(repo, POLICY, *(tc("bash", command=line) for line in HOSTILE))
    assert len(obs) == len(HOSTILE)
    for line, seen in zip(HOSTILE, obs, strict=True):
        assert "permission_denied" in seen, (line, seen)
    assert sorted(p.name for p in repo.iterdir() if p.name.startswith("pwned")) == []
    assert not (repo / "clone1").exists() and not (repo / "clone2").exists()
    config = (repo / ".git" / "config").read_text()
    assert "alias" not in config


def test_twin_plain_git_and_allowed_programs_still_run(repo: Path) -> None:
    obs = run_loop(
        repo,
        POLICY,
        tc("bash", command="git log --oneline | cat"),
        tc("bash", command="git grep -n hello"),
        tc("bash", command="git ls-remote --upload-pack=git-upload-pack ."),
        tc("bash", command="git config --get user.name"),
        tc("bash", command="git -C src status --short"),
    )
    assert "two" in obs[0] and "one" in obs[0]
    assert "src/a.txt:1:hello again" in obs[1]
    assert "refs/heads/main" in obs[2], obs[2]
    assert '"stdout": "a\\n"' in obs[3], obs[3]
    assert '"exit_code": 0' in obs[4]
