"""The template pack's personas against the fakes: what reached GitHub, Slack and PagerDuty
at each tier (the real tools, the real `charter persona run`, the mock model)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from charter.testing import Fakes, serve_fakes

ROOT = Path(__file__).resolve().parents[2]
PACK = ROOT / "examples" / "personas"
HEAD_462 = "a42b0ea937df821c296119c26916c7c31dfa3f0d"


@pytest.fixture
def fakes() -> Iterator[Fakes]:
    with serve_fakes(PACK / "fixtures" / "fakes.json") as f:
        yield f


@pytest.fixture
def pack(tmp_path: Path) -> Path:
    copy = tmp_path / "pack"
    shutil.copytree(PACK, copy, ignore=shutil.ignore_patterns(".charter", "__pycache__"))
    return copy


def set_persona(pack: Path, name: str, **fields: str) -> None:
    """Rewrite one persona's top-level fields in the copy's charter.toml."""
    text = (pack / "charter.toml").read_text()
    start = text.index(f'name = "{name}"')
    end = text.find("[[personas]]", start)
    end = len(text) if end < 0 else end
    block = text[start:end]
    for key, value in fields.items():
        block = re.sub(rf"(?m)^{key} = .*$", f"{key} = {value}", block)
    (pack / "charter.toml").write_text(text[:start] + block + text[end:])


def run(pack: Path, fakes: Fakes, persona: str, payload: str, mock: str, *extra: str) -> Any:
    env = {**os.environ, **fakes.env()}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "charter",
            "persona",
            "run",
            persona,
            "--payload",
            payload,
            "--llm",
            f"mock:{mock}",
            "--state-dir",
            str(pack / "state"),
            "--no-input",
            "--json",
            *extra,
        ],
        cwd=pack,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.stdout, proc.stderr
    return json.loads(proc.stdout)


def test_review_captain_in_shadow_reads_but_posts_nothing(pack: Path, fakes: Fakes) -> None:
    data = run(
        pack,
        fakes,
        "review_captain",
        "fixtures/github_review_requested.json",
        "fixtures/mock/review_captain_463.json",
    )
    assert data["status"] == "completed" and data["autonomy"]["effective"] == "shadow"
    (dry,) = data["dry_runs"]
    assert dry["request"]["method"] == "POST"
    assert dry["request"]["path"] == "/repos/example/charter/pulls/463/reviews"
    assert dry["request"]["body"]["comments"][0] == {
        "path": "docs/setup.md",
        "line": 2,
        "side": "RIGHT",
        "body": "Nice: maybe link docs/run.md for what the demo shows.",
    }
    assert fakes.github.requests_to("GET", "/repos/example/charter/pulls/463")  # reads happen
    assert fakes.github.requests_to("POST", ".*") == [] and fakes.github.reviews == {}


def test_review_captain_promoted_posts_one_review_with_line_comments(
    pack: Path, fakes: Fakes
) -> None:
    set_persona(
        pack,
        "review_captain",
        autonomy='"act_auto"',
        rollout_policy='{ mode = "full", percentage = 100 }',
    )
    data = run(
        pack,
        fakes,
        "review_captain",
        "fixtures/github_review_requested.json",
        "fixtures/mock/review_captain_463.json",
    )
    assert data["status"] == "completed", data
    assert data["autonomy"]["effective"] == "act_auto"
    (review,) = fakes.github.reviews["example/charter#463"]
    assert review["commit_id"] == "81378744d6c31ec1cb255a176ced5d23adb71a22"
    assert review["comments"] == [
        {
            "path": "docs/setup.md",
            "line": 2,
            "side": "RIGHT",
            "body": "Nice: maybe link docs/run.md for what the demo shows.",
        }
    ]
    posted = [
        c for c in data["tool_calls"] if c.get("executed") and c["tool"] == "github_post_review"
    ]
    assert [c["status"] for c in posted] == ["ok"]
    receipt = next(r for r in data["receipts"] if r["kind"] == "persona.tool.executed")
    # the receipt records GitHub's request id (x-github-request-id)
    assert re.search(r'"request_id": "[0-9A-F]{4}:[0-9A-F]{5}:', receipt["result"]), receipt
    # the token authenticated the write, yet is nowhere in the run record or the event log
    token = fakes.env()["GITHUB_TOKEN"]
    assert fakes.github.requests_to("POST", ".*")[0].headers["authorization"] == f"token {token}"
    assert token not in json.dumps(data)
    for stored in (pack / "state").rglob("*"):
        if stored.is_file():
            assert token.encode() not in stored.read_bytes(), stored


def test_merge_captain_suggest_proposes_the_exact_merge(pack: Path, fakes: Fakes) -> None:
    data = run(
        pack,
        fakes,
        "merge_captain",
        "fixtures/github_pr_opened.json",
        "fixtures/mock/merge_captain_pr_opened.json",
        "--tier",
        "suggest",
    )
    (proposal,) = data["proposals"]
    assert proposal["request"]["method"] == "PUT"
    assert proposal["request"]["body"] == {"sha": HEAD_462, "merge_method": "squash"}
    assert fakes.github.requests_to("PUT", ".*") == [] and fakes.github.merges == []


def test_merge_captain_unapproved_merge_never_reaches_github(pack: Path, fakes: Fakes) -> None:
    data = run(
        pack,
        fakes,
        "merge_captain",
        "fixtures/github_pr_opened.json",
        "fixtures/mock/merge_captain_pr_opened.json",
        "--approval-timeout",
        "0",
    )
    (approval,) = data["approvals"]
    assert approval["status"] == "expired" and approval["request"]["path"].endswith("/merge")
    assert fakes.github.requests_to("PUT", ".*") == [] and fakes.github.merges == []


@pytest.mark.parametrize("change", ["failing_check", "moved_head"])
def test_merge_captain_merges_only_on_passing_checks_at_the_reviewed_head(
    pack: Path, fakes: Fakes, change: str
) -> None:
    if change == "failing_check":
        fakes.github.check_run_state[f"example/charter@{HEAD_462}"][1]["conclusion"] = "failure"
        expected = "not merged: required checks not passing: lint"
    else:
        fakes.github.move_head("example/charter", 462, "c" * 40)
        for name in ("tests", "lint"):  # the new head's checks pass: the SHA guard stops it
            fakes.github.add_check_run("example/charter", "c" * 40, name, "success")
        expected = "not merged: the head moved from a42b0ea937df to cccccccccccc"
    data = run(
        pack,
        fakes,
        "merge_captain",
        "fixtures/github_pr_opened.json",
        "fixtures/mock/merge_captain_pr_opened.json",
    )
    assert data["result"]["outcome"] == expected
    assert data["approvals"] == []  # nothing to approve: the merge was never attempted
    assert fakes.github.requests_to("PUT", ".*") == [] and fakes.github.merges == []


def test_oncall_captain_acknowledges_annotates_and_posts(pack: Path, fakes: Fakes) -> None:
    set_persona(
        pack,
        "oncall_captain",
        tier='"act_auto"',
        rollout_policy='{ mode = "full", percentage = 100 }',
    )
    data = run(
        pack,
        fakes,
        "oncall_captain",
        "fixtures/pagerduty_incident_triggered.json",
        "fixtures/mock/oncall_captain_incident.json",
    )
    assert data["result"]["actions"] == {"acknowledge": "ok", "note": "ok", "slack": "ok"}
    assert fakes.pagerduty.incidents["PD-1234"]["status"] == "acknowledged"
    assert "Timeline" in fakes.pagerduty.notes["PD-1234"][0]["content"]
    (message,) = fakes.slack.messages
    assert message["channel"] == "C0INCIDENTS" and message["text"].startswith("checkout / PD-1234")
