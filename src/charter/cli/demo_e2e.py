"""The end-to-end demo behind ``make demo`` / ``charter demo``.

Runs the real ``charter`` commands, one process each, on a copy of the template pack with
the ``mock`` provider and SQLite state, and prints each command with its output:
validation, a shadow run, an approval given from the command line, a run refused by its
policy, a handoff run under a route's ``policy_override``, pause/resume with queued work,
a run stopped by its budget, then status and the supervision feed. The personas' GitHub,
Slack and PagerDuty tools talk to the offline fakes of :mod:`charter.testing` (started
here from ``fixtures/fakes.json``, fake credentials in the runs' environment); the demo
ends with what reached them. The clock is fixed (``--at``) so the output is the same on
every machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from charter.errors import CharterError

T0 = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
APPROVAL_WAIT_SECONDS = 60.0


class DemoError(CharterError, RuntimeError):
    pass


def find_pack() -> Path:
    """``examples/personas`` of this checkout (or of the working directory)."""
    candidates = [
        Path.cwd() / "examples" / "personas",
        Path(__file__).resolve().parents[3] / "examples" / "personas",
    ]
    for candidate in candidates:
        if (candidate / "charter.toml").is_file():
            return candidate
    raise DemoError("cannot find examples/personas (run from the charter checkout or pass --pack)")


@dataclass
class Step:
    title: str
    command: list[str]
    exit_code: int
    stdout: str
    stderr: str = ""


@dataclass
class Demo:
    workdir: Path
    state_dir: Path
    echo: Callable[[str], None]
    steps: list[Step] = field(default_factory=list)
    minute: int = 0
    env: dict[str, str] | None = None

    def at(self) -> str:
        self.minute += 1
        return (T0 + timedelta(minutes=self.minute)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def argv(self, args: list[str]) -> list[str]:
        return [sys.executable, "-m", "charter", *args]

    def show(self, args: list[str]) -> None:
        shown = " ".join(
            a if a and " " not in a else json.dumps(a) for a in ["charter", *args]
        ).replace(str(self.state_dir), "$STATE")
        self.echo(f"$ {shown}")

    def run(self, title: str, args: list[str], *, expect: tuple[int, ...] = (0,)) -> Step:
        self.show(args)
        proc = subprocess.run(
            self.argv(args),
            cwd=self.workdir,
            capture_output=True,
            text=True,
            check=False,
            env=self.env,
        )
        step = Step(title, args, proc.returncode, proc.stdout, proc.stderr)
        self.steps.append(step)
        self.print_output(step)
        if proc.returncode not in expect:
            raise DemoError(f"`charter {' '.join(args)}` exited {proc.returncode}:\n{proc.stderr}")
        return step

    def print_output(self, step: Step) -> None:
        for line in (step.stdout + step.stderr).rstrip("\n").splitlines():
            self.echo(f"  {line}")
        if step.exit_code:
            self.echo(f"  (exit {step.exit_code})")
        self.echo("")

    def section(self, text: str) -> None:
        self.echo(f"== {text}")


def _state(demo: Demo) -> list[str]:
    return ["--state-dir", str(demo.state_dir)]


def _approval_step(demo: Demo) -> None:
    at = demo.at()
    args = [
        "persona",
        "run",
        "merge_captain",
        "--payload",
        "fixtures/github_pr_opened.json",
        "--llm",
        "mock:fixtures/mock/merge_captain_pr_opened.json",
        "--no-input",
        "--at",
        at,
        *_state(demo),
    ]
    demo.show([*args, "&"])
    proc = subprocess.Popen(
        demo.argv(args),
        cwd=demo.workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=demo.env,
    )
    demo.echo("  (the run waits for an approval; a second process gives it)\n")
    deadline = time.monotonic() + APPROVAL_WAIT_SECONDS
    pending: list[dict[str, Any]] = []
    try:
        while not pending:
            if proc.poll() is not None or time.monotonic() > deadline:
                out, err = proc.communicate()
                raise DemoError(f"the approval run ended without asking:\n{out}\n{err}")
            listing = subprocess.run(
                demo.argv(["approve", "--json", *_state(demo)]),
                cwd=demo.workdir,
                capture_output=True,
                text=True,
                check=False,
                env=demo.env,
            )
            if listing.returncode == 0:
                pending = json.loads(listing.stdout)["pending"]
            if not pending:
                time.sleep(0.1)
        demo.run("list pending approvals", ["approve", *_state(demo)])
        item = pending[0]
        demo.run(
            "approve from the command line",
            [
                "approve",
                item["run_id"],
                item["call_id"],
                "--by",
                "maintainer",
                "--reason",
                "CI green, one review",
                "--at",
                at,
                *_state(demo),
            ],
        )
        out, err = proc.communicate(timeout=APPROVAL_WAIT_SECONDS)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    step = Step("merge_captain act_with_approval", args, proc.returncode, out, err)
    demo.steps.append(step)
    demo.echo("  the waiting run resumes:")
    demo.print_output(Step(step.title, args, proc.returncode, err + out))
    if proc.returncode != 0:
        raise DemoError(f"the approval run failed:\n{out}\n{err}")


_FEED_KEYS = ("run_id", "call_id", "tool", "status", "reason", "receipt_id", "handoff_id")


def _compact(frame: dict[str, Any]) -> str:
    payload = frame.get("payload") or {}
    bits = " ".join(f"{k}={payload[k]}" for k in _FEED_KEYS if payload.get(k) is not None)
    return (
        f"#{frame['event_id']} {frame['occurred_at']} {frame['persona_id']} "
        f"{frame['update_kind']} {bits}"
    ).rstrip()


def run_demo(
    *,
    pack: Path | None = None,
    state_dir: Path | None = None,
    echo: Callable[[str], None] = print,
) -> list[Step]:
    """Run the whole demo; returns its steps. Raises :class:`DemoError` on a failed step."""
    from charter.testing import serve_fakes

    source = pack or find_pack()
    with tempfile.TemporaryDirectory(prefix="charter-demo-") as tmp:
        workdir = Path(tmp) / "personas"
        shutil.copytree(source, workdir, ignore=shutil.ignore_patterns(".charter", ".fake_github"))
        state = state_dir.resolve() if state_dir else Path(tmp) / "state"
        world = workdir / "fixtures" / "fakes.json"
        with serve_fakes(world if world.is_file() else None) as fakes:
            env = {k: v for k, v in os.environ.items() if k not in _REAL_CREDENTIALS}
            demo = Demo(workdir, state, echo, env={**env, **fakes.env()})
            _run_steps(demo, source, fakes)
            return demo.steps


# the demo never reaches a real service, whatever the caller's environment holds
_REAL_CREDENTIALS = frozenset(
    {"GITHUB_APP_ID", "GITHUB_APP_PRIVATE_KEY", "GITHUB_APP_PRIVATE_KEY_PATH", "GH_TOKEN"}
)


def _run_steps(demo: Demo, source: Path, fakes: Any) -> None:
    workdir, echo = demo.workdir, demo.echo
    state_args = _state(demo)
    echo(
        f"charter end-to-end demo: template pack {source} copied to a temporary "
        "workspace,\nmock model provider, SQLite state in $STATE, clock fixed at "
        f"{T0:%Y-%m-%d %H:%M} UTC; GitHub, Slack and PagerDuty are\nthe offline fakes "
        "of charter.testing.\n"
    )

    demo.section("1. Validate the template pack")
    demo.run("validate", ["persona", "check", "."])

    demo.section(
        "2. review_captain reviews PR #463 in shadow (its rollout mode caps it): "
        "the GitHub review becomes a dry-run receipt, nothing executes"
    )
    demo.run(
        "review_captain shadow",
        [
            "persona", "run", "review_captain",
            "--payload", "fixtures/github_review_requested.json",
            "--llm", "mock:fixtures/mock/review_captain_463.json",
            "--at", demo.at(), *state_args,
        ],
    )  # fmt: skip

    demo.section(
        "3. merge_captain (act_with_approval) merges PR #462 once a maintainer approves "
        "from the command line"
    )
    _approval_step(demo)

    demo.section(
        "4. merge_captain on a failed check tries to force-push: refused by its policy "
        "(commands deny git push:*), with the receipt"
    )
    demo.run(
        "merge_captain refused by policy",
        [
            "persona", "run", "merge_captain",
            "--payload", "fixtures/github_check_failed.json",
            "--llm", "mock:fixtures/mock/merge_captain_check_failed.json",
            "--at", demo.at(), *state_args,
        ],
    )  # fmt: skip

    demo.section(
        "5. A handoff through a route: review_captain's findings reached merge_captain "
        "via route review-findings, whose policy_override (read_only) replaces its policy"
    )
    demo.run(
        "merge_captain handoff run",
        [
            "persona", "run", "merge_captain", "--inbox",
            "--llm", "mock:fixtures/mock/merge_captain_handoff.json",
            "--at", demo.at(), *state_args,
        ],
    )  # fmt: skip

    demo.section(
        "6. Pause review_captain, queue work, resume: the queue drains through the workflow"
    )
    at = demo.at()
    demo.run("pause", ["persona", "pause", "review_captain", "--at", at, *state_args])
    demo.run(
        "queued",
        [
            "persona", "run", "review_captain",
            "--payload", "fixtures/github_review_requested_465.json",
            "--at", at, *state_args,
        ],
    )  # fmt: skip
    demo.run(
        "resume",
        [
            "persona", "run", "review_captain", "--resume",
            "--llm", "mock:fixtures/mock/review_captain_465.json",
            "--at", demo.at(), *state_args,
        ],
    )  # fmt: skip

    demo.section(
        "7. review_captain on PR #464 (the whole dependency tree vendored) is stopped by "
        "its budget: the next call's worst case would cross max_tokens"
    )
    demo.run(
        "budget stop",
        [
            "persona", "run", "review_captain",
            "--payload", "fixtures/github_review_requested_464.json",
            "--llm", "mock:fixtures/mock/review_captain_464.json",
            "--at", demo.at(), *state_args,
        ],
        expect=(1,),
    )  # fmt: skip

    demo.section("8. Status and the supervision feed")
    at = demo.at()
    for name in ("merge_captain", "review_captain"):
        demo.run(f"status {name}", ["persona", "status", name, "--at", at, *state_args])
    demo.show(["persona", "supervision", "tail", *state_args])
    feed = subprocess.run(
        demo.argv(["persona", "supervision", "tail", *state_args]),
        cwd=workdir,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    frames = [json.loads(line) for line in feed]
    kinds: dict[str, int] = {}
    for frame in frames:
        kinds[frame["update_kind"]] = kinds.get(frame["update_kind"], 0) + 1
    echo(f"  {len(frames)} persona/update frames; by update_kind:")
    for kind, count in sorted(kinds.items()):
        echo(f"    {count:4d}  {kind}")
    echo("  the last ones (event_id, occurred_at, persona, update_kind, payload keys):")
    for frame in frames[-10:]:
        echo("    " + _compact(frame))
    demo.steps.append(
        Step("supervision feed", ["persona", "supervision", "tail"], 0, "\n".join(feed))
    )
    echo("")
    demo.section(
        "9. What reached the (fake) GitHub: reads at every tier, writes only once approved"
    )
    for req in fakes.github.requests:
        body = f" {json.dumps(req.json())}" if req.method != "GET" else ""
        echo(f"  {req.method} {req.path}{body}")
    reviews = sum(len(v) for v in fakes.github.reviews.values())
    echo(f"  reviews posted: {reviews} (review_captain runs in shadow); merges: "
         f"{len(fakes.github.merges)}")  # fmt: skip
    echo("")
    echo("Done: every decision above is an event in the log; every side effect has a receipt.")


__all__ = ["DemoError", "Step", "find_pack", "run_demo"]
