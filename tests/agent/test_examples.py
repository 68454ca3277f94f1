"""Every example in examples/agents/ runs (mock provider) and shows what it claims."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "agents"

EXPECT = {
    "skills_lifecycle.py": [
        "skill_activated",
        "active skills: ['ship']",
        "handlers ran: ['deploy api']",
    ],
    "sub_agent_envelope.py": [
        '"category": "permission_denied"',
        "found: True {'paths': ['pyproject.toml']}",
        "handlers ran: ['read pyproject.toml']",
    ],
    "workers_fleet.py": ["granted budgets: [400, 400, 200]", "follow-up: auth: shorter"],
    "scoped_subagent.py": ["admin ran: False"],
    "research_then_act.py": ["summary.md exists: True"],
    "mcp_allowlist.py": ["status: done"],
    "approvals_in_loop.py": [
        "asked about write src/main.py: no",
        "written: ['README.md', 'config/app.toml']",
    ],
    "sessions_and_compaction.py": [
        "compactions: True",
        "largest prompt under budget: True",
        "failure kept: True",
        "queued message delivered: True",
    ],
    "daemon_watch.py": ["pending events: 0", "final state: idle daemon_stopped"],
    "chat_with_simulated_user.py": ["turns: 2 closed: simulated_user_stop"],
    "captain_preset.py": [
        "merged: [461]",
        "audited tools: ['list_prs', 'merge_pr', 'merge_pr']",  # the refused merge too
        "model calls logged: 4 status: done",
    ],
}


def test_every_example_is_listed() -> None:
    assert {p.name for p in EXAMPLES.glob("*.py") if not p.name.startswith("_")} == set(EXPECT)


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_example_runs(name: str, tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OLLAMA_HOST")
    }
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    for line in EXPECT[name]:
        assert line in out.stdout, out.stdout
