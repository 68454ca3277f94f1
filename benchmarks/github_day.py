"""A realistic day of one repository's GitHub deliveries (issue 31), built from the real
payload fixtures of GitHub's documentation under ``tests/runtime/fixtures/github``.

Pushes (bursts to one branch among them), pull requests opened, synchronized, asked for
review, reviewed, commented on and closed, issues opened, commented on and closed, check
suites completing, and GitHub's redeliveries of some of them (the same
``X-GitHub-Delivery``, the same body). Deterministic for a seed. Used by
``tests/run/test_github_day.py`` (two replicas, one killed twice) and by
``benchmarks/runtime_fleet.py --workload github-day``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "runtime" / "fixtures" / "github"
REPO = "acme/api"

#: personas of the day's manifest, each woken by what it declares (event AND action)
PERSONAS = """
[[personas]]
name = "builder"
description = "Builds every pushed commit."
entry_workflow = "{workflow}"
tools = ["github"]
autonomy_tier = "act_auto"
receipt_policy = "required"
triggers = ["github.push"]
runtime = {{ max_concurrency = 1, lease_ttl_seconds = {ttl}, retry_backoff_seconds = 0.2 }}

[[personas]]
name = "reviewer"
description = "Reviews each head of a pull request once."
entry_workflow = "{workflow}"
tools = ["github"]
autonomy_tier = "act_auto"
receipt_policy = "required"
triggers = ["github.pr_opened", "github.pr_synchronize", "github.review_requested"]
runtime = {{ max_concurrency = 2, lease_ttl_seconds = {ttl}, retry_backoff_seconds = 0.2 }}

[[personas]]
name = "responder"
description = "Answers comments and reviews, triages new issues."
entry_workflow = "{workflow}"
tools = ["github"]
autonomy_tier = "act_auto"
receipt_policy = "required"
triggers = ["github.issue_comment", "github.review_submitted", "github.issue_opened"]
runtime = {{ max_concurrency = 2, lease_ttl_seconds = {ttl}, retry_backoff_seconds = 0.2 }}

[[personas]]
name = "ci_watch"
description = "Looks at failed check suites."
entry_workflow = "{workflow}"
tools = ["github"]
autonomy_tier = "act_auto"
receipt_policy = "required"
triggers = ["github.check_failed"]
runtime = {{ max_concurrency = 1, lease_ttl_seconds = {ttl}, retry_backoff_seconds = 0.2 }}
"""


@dataclass(frozen=True)
class Delivery:
    """One webhook as GitHub sends it."""

    event: str  # X-GitHub-Event
    delivery_id: str  # X-GitHub-Delivery
    body: bytes
    redelivery: bool = False

    def headers(self, secret: str) -> dict[str, str]:
        digest = hmac.new(secret.encode(), self.body, hashlib.sha256).hexdigest()
        return {
            "X-GitHub-Event": self.event,
            "X-GitHub-Delivery": self.delivery_id,
            "X-Hub-Signature-256": "sha256=" + digest,
            "Content-Type": "application/json",
        }


def _fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    data["repository"]["full_name"] = REPO
    data["repository"]["name"] = REPO.split("/")[1]
    return data


def day(seed: int = 31, *, redeliveries: int = 15) -> list[Delivery]:
    """About 200 deliveries of one repository's day, in the order GitHub sends them."""
    rng = random.Random(seed)
    counter = 0
    out: list[Delivery] = []

    def sha() -> str:
        return f"{rng.getrandbits(160):040x}"

    def send(event: str, payload: dict[str, Any]) -> None:
        nonlocal counter
        counter += 1
        ident = f"{seed:04d}0000-0000-4000-8000-{counter:012d}"
        out.append(Delivery(event, ident, json.dumps(payload).encode()))

    heads: dict[str, str] = {"refs/heads/main": sha()}
    prs: dict[int, str] = {}  # open pull request -> its head
    issues: list[int] = []
    ids = iter(range(900_000, 10_000_000))

    def push(ref: str) -> None:
        payload = _fixture("push")
        payload["ref"], payload["before"] = ref, heads.get(ref, "0" * 40)
        payload["after"] = heads[ref] = sha()
        send("push", payload)

    def pull(action: str, number: int) -> None:
        name = {"opened": "pull_request.opened", "synchronize": "pull_request.synchronize",
                "review_requested": "pull_request.review_requested",
                "closed": "pull_request.closed"}[action]  # fmt: skip
        payload = _fixture(name)
        payload["number"] = payload["pull_request"]["number"] = number
        if action == "synchronize":
            payload["before"] = prs[number]
            prs[number] = sha()
            payload["after"] = prs[number]
        payload["pull_request"]["head"]["sha"] = prs[number]
        send("pull_request", payload)

    def review(number: int) -> None:
        payload = _fixture("pull_request_review.submitted")
        payload["number"] = payload["pull_request"]["number"] = number
        payload["pull_request"]["head"]["sha"] = prs[number]
        payload["review"]["id"] = next(ids)
        send("pull_request_review", payload)

    def comment(number: int, on_pr: bool) -> None:
        payload = _fixture("issue_comment.created")
        payload["issue"]["number"] = number
        if on_pr:
            payload["issue"]["pull_request"] = {
                "url": f"https://api.github.com/repos/{REPO}/pulls/{number}"
            }
        payload["comment"]["id"] = next(ids)
        send("issue_comment", payload)

    def issue(action: str, number: int) -> None:
        payload = _fixture("issues.opened")
        payload["action"] = action
        payload["issue"]["number"] = number
        send("issues", payload)

    def check(failed: bool) -> None:
        payload = _fixture("check_suite.completed")
        payload["check_suite"]["id"] = next(ids)
        payload["check_suite"]["head_sha"] = heads["refs/heads/main"]
        payload["check_suite"]["conclusion"] = "failure" if failed else "success"
        send("check_suite", payload)

    next_number = 100
    for hour in range(10):  # a working day, one block an hour
        for _ in range(rng.randint(1, 4)):  # pushes, a burst to one branch among them
            branch = rng.choice(["refs/heads/main", f"refs/heads/feature-{hour}"])
            for _ in range(rng.choice([1, 1, 1, 3])):
                push(branch)
        if hour < 8:  # new pull requests
            for _ in range(2):
                next_number += 1
                prs[next_number] = sha()
                pull("opened", next_number)
                pull("review_requested", next_number)
        for number in rng.sample(sorted(prs), min(len(prs), 3)):
            pull("synchronize", number)
            review(number)
            if rng.random() < 0.6:
                comment(number, on_pr=True)
        if prs and hour >= 3:  # merges
            number = rng.choice(sorted(prs))
            pull("closed", number)
            del prs[number]
        next_number += 1
        issues.append(next_number)
        issue("opened", next_number)
        comment(rng.choice(issues), on_pr=False)
        if hour % 3 == 2:
            issue("closed", issues.pop(0))
        check(failed=hour % 3 == 1)  # a red suite now and then
        check(failed=False)
    # GitHub redelivers some (a timeout on its side, a person pressing "Redeliver")
    for original in rng.sample(out, redeliveries):
        out.insert(
            rng.randint(out.index(original) + 1, len(out)),
            Delivery(original.event, original.delivery_id, original.body, redelivery=True),
        )
    return out


def manifest(workflow: str, ttl: int = 2) -> str:
    return PERSONAS.format(workflow=workflow, ttl=ttl)


#: the day's workflow: one recorded side effect per run (a comment), and a short pause
WORKFLOW = '''
import json
import time
from pathlib import Path

from charter.agent import make_tool


def run(ctx):
    def github(action: str, key: str = "") -> dict:
        """Act on GitHub (fake): appends what it did to done.jsonl."""
        with (Path(ctx.workspace) / "done.jsonl").open("a") as fh:
            line = {"persona": ctx.persona.name, "action": action, "key": key}
            fh.write(json.dumps(line) + "\\n")
        return {"status": "ok"}

    ctx.register_tool(make_tool(github, side_effect_level="network"))
    time.sleep(0.05)
    return ctx.call_tool("github", action="comment", key=ctx.trigger.work_key)
'''


__all__ = ["PERSONAS", "REPO", "WORKFLOW", "Delivery", "day", "manifest"]
