"""Path rules as agent-persona users write them (bare, ``./``, ``~``, absolute, glob), turned
into each CLI's path syntax. Issue 19 items 1-2: a bare relative entry must never widen to
``/`` (codex) or to a regex matching every path (gemini)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from .conftest import env_with, make_persona, plan_json

ALLOW = ["src", "./docs", "~/work", "ABS", "./lib/*.py"]
DENY = [".env", "./secrets", "~/.ssh", "ABS", "*.pem", "./logs/*.log"]


def _persona(project: Path, tmp_path: Path, home: Path) -> tuple[Path, Path]:
    outside = (tmp_path / "outside").resolve()
    for d in (project / "src", project / "docs", project / "lib", home / "work", outside):
        d.mkdir(parents=True, exist_ok=True)
    sub = lambda xs: [str(outside) if x == "ABS" else x for x in xs]  # noqa: E731
    make_persona(
        project / ".personas",
        "p",
        policy={"paths": {"allow": sub(ALLOW), "deny": sub(DENY)}},
    )
    return project.resolve(), outside


def _plan(tool: str, project: Path, home: Path) -> dict:  # type: ignore[type-arg]
    # what the CLI's own translation enforces (the sandbox around it is tested apart)
    env = env_with(HOME=str(home), CHARTER_LAUNCH_SANDBOX="never")
    return plan_json(tool, "p", cwd=project, env=env)


def test_codex_writable_roots_never_widen(project: Path, tmp_path: Path) -> None:
    home = (tmp_path / "home").resolve()
    ws, outside = _persona(project, tmp_path, home)
    plan = _plan("codex", project, home)
    (cfg,) = [a for a in plan["argv"] if "writable_roots=" in a]
    roots = json.loads(cfg.split("writable_roots=", 1)[1])
    assert "/" not in roots
    assert sorted(roots) == sorted(
        {str(ws / "src"), str(ws / "docs"), str(home / "work"), str(outside), str(ws / "lib")}
    )
    element = {e["element"]: e for e in plan["elements"]}["paths.write.allow"]
    assert "bare names taken relative to the workspace: ['src']" in element["reason"]


def _gemini_patterns(plan: dict) -> list[re.Pattern[str]]:  # type: ignore[type-arg]
    (path,) = [p for p in plan["files"] if p.endswith("gemini-policy.toml")]
    rules = tomllib.loads(plan["files"][path])["rule"]
    sources = [r["argsPattern"] for r in rules if "argsPattern" in r]
    # gemini 0.61's isSafeRegExp: a pattern it flags is dropped with only a warning.
    unsafe = re.compile(r"\([^)]*[*+?{].*\)[*+?{]")
    assert not [s for s in sources if unsafe.search(s) or len(s) > 2048]
    return [re.compile(s) for s in sources]


def _args(path: str) -> str:
    return json.dumps({"file_path": path})  # what the policy engine matches against


@pytest.mark.parametrize("compact", [True, False])
def test_gemini_path_patterns_match_only_what_is_denied(
    project: Path, tmp_path: Path, compact: bool
) -> None:
    home = (tmp_path / "home").resolve()
    ws, outside = _persona(project, tmp_path, home)
    plan = _plan("gemini", project, home)
    patterns = _gemini_patterns(plan)
    assert patterns

    def denied(path: str) -> bool:
        text = _args(path)
        if compact:
            text = text.replace(": ", ":")
        return any(p.search(text) for p in patterns)

    for hit in [
        f"{ws}/.env", ".env", "./.env", "a/b/.env", f"{ws}/sub/.env/x", "/elsewhere/.env",
        f"{ws}/secrets", f"{ws}/secrets/k", "secrets/k", "./secrets",
        f"{home}/.ssh/id_rsa", f"{home}/.ssh",
        str(outside), f"{outside}/x/y",
        "key.pem", f"{ws}/a/key.pem", "/etc/ssl/x.pem",
        f"{ws}/logs/a.log", "logs/a.log", "./logs/a.log",
    ]:  # fmt: skip
        assert denied(hit), hit
    for miss in [
        f"{ws}/src/main.py", "src/main.py", "README.md", "/etc/hosts", f"{ws}/.envrc",
        f"{ws}/my.env", f"{ws}/secretsX", "other/secrets", f"{home}/.sshx",
        f"{outside}x", "key.pem.txt", f"{ws}/logs/a.txt", f"{ws}/logs/sub/a.log.1",
        "/", "",
    ]:  # fmt: skip
        assert not denied(miss), miss


def test_claude_rules_keep_each_form(project: Path, tmp_path: Path) -> None:
    home = (tmp_path / "home").resolve()
    ws, outside = _persona(project, tmp_path, home)
    plan = _plan("claude", project, home)
    (path,) = [p for p in plan["files"] if p.endswith("claude-settings.json")]
    deny = json.loads(plan["files"][path])["permissions"]["deny"]
    for rule in (
        "Read(**/.env)",
        f"Read(/{ws}/secrets)",
        f"Read(/{ws}/secrets/**)",
        f"Read(/{home}/.ssh/**)",
        f"Read(/{outside}/**)",
        "Read(**/*.pem)",
        f"Read(/{ws}/logs/*.log)",
    ):
        assert rule in deny, rule
    assert not any(r.endswith("(/)") or r.endswith("(//)") or "(///" in r for r in deny)


def test_opencode_reports_paths_as_not_enforced(project: Path, tmp_path: Path) -> None:
    home = (tmp_path / "home").resolve()
    _persona(project, tmp_path, home)
    plan = _plan("opencode", project, home)
    elements = {e["element"]: e for e in plan["elements"]}
    for key in ("paths.read.deny", "paths.write.deny", "paths.write.allow"):
        assert elements[key]["strength"] == "none", key
