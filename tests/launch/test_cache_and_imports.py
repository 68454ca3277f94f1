"""The launch cache (valid only while its inputs are unchanged) and what launching imports."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import cast

from .conftest import charter, env_with, make_persona, plan_json, write

HEAVY = ("pydantic", "openai", "anthropic", "mcp", "httpx", "rich", "psycopg")

PROBE = """
import json, sys
from charter.cli import main
try:
    main({args!r})
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def _age(*roots: Path) -> None:
    """Backdate files: the cache ignores anything changed in the last seconds."""
    past = time.time() - 3600
    for root in roots:
        for path in [root, *root.rglob("*")]:
            os.utime(path, (past, past), follow_symlinks=False)


def _modules(args: list[str], cwd: Path) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(args=args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    loaded: list[str] = json.loads(proc.stderr.strip().splitlines()[-1])
    return loaded


def _has(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == n or m.startswith(n + ".") for n in names)]


def test_a_cache_hit_imports_neither_the_policy_core_nor_the_manifest(project: Path) -> None:
    make_persona(project / ".personas", "p", policy={"tools": {"allow": ["read", "bash"]}})
    _age(project)
    args = ["launch", "claude", "p", "--dry-run", "--", "-p", "hi"]
    first = _modules(args, project)  # builds the plan and stores it
    assert _has(first, ("charter.policy", "charter.manifest"))
    assert _has(first, HEAVY) == []
    second = _modules(args, project)
    assert _has(second, ("charter.policy", "charter.manifest", *HEAVY)) == []
    print_policy = _modules(["print-policy", "claude", "p"], project)
    assert _has(print_policy, HEAVY) == []


def test_the_cache_never_serves_a_stale_plan(project: Path) -> None:
    folder = make_persona(project / ".personas", "p", "V1\n", policy={"tools": {"allow": ["read"]}})
    _age(project)
    first = plan_json("claude", "p", cwd=project)
    again = plan_json("claude", "p", cwd=project)
    assert "--tools=Read" in again["argv"]
    # The same plan, with a fresh temp dir per launch even from the cache.
    assert first["files"].keys() != again["files"].keys()
    assert list(first["files"].values()) == list(again["files"].values())
    strip = re.compile(r"charter-claude-[0-9a-f]+")
    assert [strip.sub("T", a) for a in first["argv"]] == [strip.sub("T", a) for a in again["argv"]]

    write(folder / "persona.json", json.dumps({"policy": {"tools": {"allow": ["bash"]}}}))
    changed = plan_json("claude", "p", cwd=project)
    assert "--tools=Bash" in changed["argv"]

    _age(project)
    write(folder / "CLAUDE.md", "V2 FOR CLAUDE\n")  # a new file in the persona folder
    out = charter("launch", "claude", "p", "--dry-run", "--json", cwd=project)
    assert json.loads(out.stdout)["overlay_source"].endswith("CLAUDE.md")

    _age(project)
    write(project / ".personas" / ".shared" / "meta.AGENTS.md", "META\n")
    out = charter("print-overlay", "claude", "p", cwd=project)
    assert out.stdout.startswith("META")
    plan = plan_json("claude", "p", cwd=project)
    assert plan["overlay_source"].endswith("CLAUDE.md")

    # User arguments and options are part of the key.
    filtered = plan_json("claude", "p", "--", "--permission-mode", "plan", cwd=project)
    assert filtered["args"]["filtered"]


def test_cache_can_be_turned_off(project: Path) -> None:
    make_persona(project / ".personas", "p", policy={"tools": {"allow": ["read"]}})
    _age(project)
    env = env_with(CHARTER_LAUNCH_CACHE="0")
    plan_json("claude", "p", cwd=project, env=env)
    # the same rule as charter.launch.cache: $XDG_CACHE_HOME, else ~/.cache
    cache = Path(env.get("XDG_CACHE_HOME") or Path(env["HOME"]) / ".cache") / "charter" / "launch"
    assert not cache.exists() or not any(cache.iterdir())
    plan_json("claude", "p", cwd=project)
    assert any(cache.iterdir())


def test_launch_from_the_cache_runs_the_same_way(project: Path, fakebin: Path) -> None:
    make_persona(
        project / ".personas",
        "p",
        "I am {{persona}}.\n",
        policy={"tools": {"deny": ["webfetch"]}, "paths": {"deny": ["./x"]}},
    )
    _age(project, fakebin)
    capture = project.parent / "cap.json"
    env = env_with(fakebin, FAKE_CLI_CAPTURE=str(capture))
    records = []
    for _ in range(2):
        out = charter(
            "launch", "claude", "p", "--run-mode", "swap", "--", "-p", "hi", cwd=project, env=env
        )
        assert out.returncode == 0, out.stderr
        records.append(json.loads(capture.read_text()))
    a, b = records
    assert a["overlay"] == b["overlay"] == "I am p.\n"
    settings = [x for x in b["argv"] if x.startswith("--settings=")]
    assert settings and b["files"]  # the cached job wrote its files into a new temp dir
    assert a["argv"] != b["argv"]  # (a different temp dir)
    assert [x for x in a["argv"] if "charter-claude-" not in x] == [
        x for x in b["argv"] if "charter-claude-" not in x
    ]
    assert not (project / "CLAUDE.md").exists()


GC_PROBE = """
import gc, json, sys
from charter.cli import main
try:
    main({args!r})
except SystemExit:
    pass
print(json.dumps({{"gc": gc.isenabled(), "modules": sorted(sys.modules)}}), file=sys.stderr)
"""


def _cold(args: list[str], cwd: Path) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", GC_PROBE.format(args=args)],
        cwd=cwd,
        env=env_with(CHARTER_LAUNCH_CACHE="0"),
        capture_output=True,
        text=True,
        check=True,
    )
    data: dict[str, object] = json.loads(proc.stderr.strip().splitlines()[-1])
    return data


def test_a_cold_print_policy_builds_only_what_the_persona_uses(project: Path) -> None:
    """Stages, routes and triggers load with a persona that declares them, not before; the
    garbage collector paused for the imports is back on afterwards."""
    make_persona(project / ".personas", "p", policy={"tools": {"allow": ["read", "bash"]}})
    plain = _cold(["print-policy", "claude", "p"], project)
    assert plain["gc"] is True
    modules = plain["modules"]
    assert isinstance(modules, list)
    assert "charter.manifest.model" in modules
    assert _has(modules, ("charter.manifest.workflow_model", "charter.policy.scope")) == []

    write(
        project / "charter.toml",
        '[[personas]]\nname = "s"\ndescription = "d"\nentry_workflow = "pkg.mod:run"\n'
        'tools = ["read"]\nautonomy_tier = "suggest"\nreceipt_policy = "optional"\n\n'
        '[[personas.stages]]\nname = "look"\nallowed_tools = ["read"]\n',
    )
    staged = _cold(["print-policy", "claude", "s", "--json"], project)
    assert staged["gc"] is True
    assert "charter.manifest.workflow_model" in cast(list[str], staged["modules"])
