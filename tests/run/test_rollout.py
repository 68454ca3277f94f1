"""Autonomy a persona earns (issue 18): rollout arms, agreement, promotion and demotion.

The scripted month runs the real engine (mock provider, fixed clock per run) over 200
GitHub work keys in two cohorts; outcomes arrive as review webhooks through the same
observation the server and ``persona run`` use; the numbers are read back from the
report command's JSON.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from charter.manifest import RolloutPolicy, load_manifest
from charter.run import (
    RunOptions,
    Session,
    cohort_values,
    open_session,
    promotion,
    run_in_session,
    select_arm,
    wilson,
    work_bucket,
)

from .conftest import PACK, invoke

START = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
REPOS = ("acme/api", "acme/web")

REVIEWER = """
[[personas]]
name = "reviewer"
description = "Reviews pull requests; starts in shadow."
entry_workflow = "workflows/scripted.py:run"
tools = ["github", "read"]
autonomy_tier = "act_with_approval"
receipt_policy = "required"
triggers = ["github.review_requested"]
{rollout}

[personas.policy]
paths = {{ allow = ["./"], deny = ["./secrets/**"] }}
"""

ROLLOUT = (
    'rollout_policy = { mode = "shadow", cohorts = ["repository:acme/api", '
    '"repository:acme/web"], promotion = { min_runs = 50, min_agreement = 0.6, '
    'max_denials_per_run = 0.5, max_cost_per_run = 0.05, window = "30d" } }'
)


def write_pack(root: Path, rollout: str = ROLLOUT) -> Path:
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(PACK, root)
    (root / "charter.toml").write_text(REVIEWER.format(rollout=rollout))
    return root


@pytest.fixture
def pack(tmp_path: Path) -> Path:
    return write_pack(tmp_path / "pack")


@pytest.fixture
def session(pack: Path) -> Iterator[Session]:
    s = open_session(RunOptions(manifest=pack, state_dir=pack / "state", at=START))
    try:
        yield s
    finally:
        s.close()


def review_requested(repo: str, number: int, verdict: str, denials: int = 0) -> dict[str, Any]:
    calls: list[dict[str, Any]] = [
        {"tool": "read", "args": {"path": f"secrets/key{i}"}, "stage": None} for i in range(denials)
    ]
    calls.append({"tool": "github", "args": {"action": verdict, "pr": number}})
    return {
        "action": "review_requested",
        "repository": {"full_name": repo},
        "pull_request": {"number": number, "user": {"login": "dev"}, "labels": []},
        "calls": calls,
    }


def review_submitted(repo: str, number: int, state: str) -> dict[str, Any]:
    return {
        "action": "submitted",
        "review": {"state": state},
        "repository": {"full_name": repo},
        "pull_request": {"number": number},
    }


def run_at(session: Session, at: datetime, payload: dict[str, Any]) -> Any:
    session.options.at = at
    return run_in_session(
        session, "reviewer", provider="github", kind="review_requested", payload=payload
    )


def outcome_at(session: Session, at: datetime, payload: dict[str, Any]) -> list[dict[str, Any]]:
    session.options.at = at
    return promotion.observe_trigger(
        session.runtime,
        list(session.manifest.personas),
        provider="github",
        kind="review_submitted",
        metadata=None,
        payload=payload,
        at=at,
    )


def report_json(pack: Path, at: datetime, *extra: str) -> dict[str, Any]:
    result = invoke(
        ["persona", "rollout", "report", "reviewer", "--manifest", str(pack), "--state-dir",
         str(pack / "state"), "--at", at.strftime("%Y-%m-%dT%H:%M:%SZ"), "--json", *extra]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def promote(pack: Path, at: datetime, to: str, *extra: str) -> Any:
    return invoke(
        ["persona", "promote", "reviewer", "--to", to, "--manifest", str(pack), "--state-dir",
         str(pack / "state"), "--at", at.strftime("%Y-%m-%dT%H:%M:%SZ"), *extra]
    )  # fmt: skip


def month(session: Session, count: int = 200, first: int = 0) -> datetime:
    """Work keys ``first..first+count``: api agrees 9 in 10, web 1 in 2; outcome same day."""
    at = START
    for i in range(first, first + count):
        repo = REPOS[i % 2]
        n = i // 2 + 1
        at = START + timedelta(hours=3 * i)
        disagree = (n % 10 == 0) if repo == "acme/api" else (n % 2 == 0)
        result = run_at(session, at, review_requested(repo, n, "approve"))
        assert result.status == "completed", result.error
        assert result.autonomy["effective"] == "shadow"
        assert result.autonomy["arm"] == "rollout"
        assert result.autonomy["rollout"]["cohort"] == f"repository:{repo}"
        (recorded,) = outcome_at(
            session,
            at + timedelta(hours=1),
            review_submitted(repo, n, "changes_requested" if disagree else "approved"),
        )
        assert recorded["agree"] is (not disagree)
    return at + timedelta(hours=2)


def test_a_scripted_month_earns_a_promotion_and_a_denial_spike_takes_it_back(
    pack: Path, session: Session
) -> None:
    # 40 runs in: too few for min_runs, so promote is refused with the numbers
    at = month(session, 40)
    refused = promote(pack, at, "suggest")
    assert refused.exit_code == 1
    assert "min_runs: 40 (needs >= 50) NOT MET" in refused.output
    refused_json = promote(pack, at, "suggest", "--json")
    error = json.loads(refused_json.stdout)["error"]
    assert error["kind"] == "refused"
    # 28 of 40 agreed: the rate is 0.7 but the interval is still wide (lower bound ~0.55)
    assert {c["criterion"]: c["ok"] for c in error["checks"]} == {
        "min_runs": False,
        "min_agreement": False,
        "max_denials_per_run": True,
        "max_cost_per_run": True,
    }

    # the rest of the month: 200 work keys in all
    at = month(session, 160, first=40)
    data = report_json(pack, at)
    assert data["total"]["runs"] == 200
    (arm,) = data["arms"]
    assert (arm["arm"], arm["tier"], arm["runs"]) == ("rollout", "shadow", 200)
    by_cohort = {c["cohort"]: c for c in data["cohorts"]}
    api, web = by_cohort["repository:acme/api"], by_cohort["repository:acme/web"]
    assert (api["agreement"]["agreed"], api["agreement"]["disagreed"]) == (90, 10)
    assert (web["agreement"]["agreed"], web["agreement"]["disagreed"]) == (50, 50)
    total = data["total"]["agreement"]
    assert (total["agreed"], total["rate"]) == (140, 0.7)
    assert 0.633 < total["wilson_low"] < 0.634 and 0.759 < total["wilson_high"] < 0.760
    assert data["total"]["denials_per_run"] == 0.0
    assert data["total"]["proposals"] == 200
    assert data["pending_outcomes"] == 0
    assert data["promotion"]["eligible"] is True
    assert (data["promotion"]["current_tier"], data["promotion"]["next_tier"]) == (
        "shadow",
        "suggest",
    )
    # a report window that only holds the last days sees only their runs
    recent = report_json(pack, at, "--since", "2d")
    assert 0 < recent["total"]["runs"] < 200

    # above the manifest's tier: never
    above = promote(pack, at, "act_auto")
    assert above.exit_code == 1 and "never goes above" in above.output
    ok = promote(pack, at, "suggest", "--json", "--by", "lead")
    assert ok.exit_code == 0, ok.output
    promoted = json.loads(ok.stdout)
    assert (promoted["from"], promoted["to"], promoted["by"]) == ("shadow", "suggest", "lead")
    again = promote(pack, at, "suggest")
    assert again.exit_code == 1 and "already runs at suggest" in again.output

    # the next run uses the earned tier: its github call becomes a proposal, not a dry run
    result = run_at(session, at + timedelta(hours=1), review_requested("acme/api", 900, "approve"))
    assert result.autonomy["effective"] == "suggest"
    assert "promoted to suggest" in result.autonomy["reason"]
    assert len(result.proposals) == 1 and not result.dry_runs

    # a denial spike (6 denied reads of ./secrets in one run) demotes one step
    spike = run_at(
        session,
        at + timedelta(hours=2),
        review_requested("acme/api", 901, "approve", denials=6),
    )
    assert len(spike.denied) == 6
    assert any("demoted from suggest to shadow" in w for w in spike.warnings), spike.warnings
    kinds = [e.kind for e in session.log.iter_all(persona="reviewer")]
    assert kinds.count("persona.autonomy.promoted") == 1
    assert kinds.count("persona.autonomy.demoted") == 1
    after = run_at(session, at + timedelta(hours=3), review_requested("acme/api", 902, "approve"))
    assert after.autonomy["effective"] == "shadow"
    assert after.autonomy["standing"]["kind"] == "demoted"  # the promotion no longer applies

    # the supervision feed carries both
    feed = invoke(
        ["persona", "supervision", "tail", "--persona", "reviewer", "--state-dir",
         str(pack / "state")]
    )  # fmt: skip
    assert "persona.autonomy.promoted" in feed.output
    assert "persona.autonomy.demoted" in feed.output

    # status shows the arm and the standing
    status = invoke(
        ["persona", "status", "reviewer", "--manifest", str(pack), "--state-dir",
         str(pack / "state"), "--json"]
    )  # fmt: skip
    rollout = json.loads(status.stdout)["rollout"]
    assert rollout["standing"]["kind"] == "demoted"
    assert rollout["tiers_now"] == {"rollout": "shadow", "outside": "shadow"}
    assert rollout["last_run"]["arm"] == "rollout"

    # the console's fleet page shows the standing
    from starlette.testclient import TestClient

    from charter.run.web import Access, build_app

    token = "t0ken-for-the-rollout-test-0123456789"
    app = build_app(
        RunOptions(manifest=pack, state_dir=pack / "state"), access=Access({token: "lead"})
    )
    client = TestClient(app)
    auth = {"Authorization": f"Bearer {token}"}
    (row,) = client.get("/api/fleet", headers=auth).json()["personas"]
    assert row["standing"]["kind"] == "demoted" and row["standing"]["tier"] == "shadow"
    page = client.get("/console", headers=auth).text
    assert "demoted to shadow" in page

    # the projection equals a full replay of the log
    from charter.run import evidence

    assert (
        evidence.load(session.log, "reviewer").to_dict()
        == evidence.rebuild(session.log, "reviewer").to_dict()
    )


def test_feedback_records_agreement_once(pack: Path, session: Session) -> None:
    result = run_at(session, START, review_requested("acme/api", 1, "approve"))
    run_id = result.run_id
    assert run_id is not None

    def feedback(*args: str) -> Any:
        return invoke(
            ["persona", "feedback", *args, "--persona", "reviewer", "--manifest", str(pack),
             "--state-dir", str(pack / "state"), "--at", "2026-10-01T10:00:00Z"]
        )  # fmt: skip

    first = feedback(run_id, "--agree", "--note", "right call", "--json")
    assert first.exit_code == 0, first.output
    entry = json.loads(first.stdout)
    assert entry["agree"] is True and entry["source"] == "feedback"
    assert entry["note"] == "right call" and entry["predicted"] == "review:approved"
    second = feedback(run_id, "--disagree")
    assert second.exit_code == 1 and "already has an agreement" in second.output
    missing = feedback("run-nope", "--agree", "--json")
    assert missing.exit_code == 2
    assert json.loads(missing.stdout)["error"]["kind"] == "not_found"
    neither = feedback(run_id)
    assert neither.exit_code == 2 and "--agree or --disagree" in neither.output
    # the webhook outcome that follows finds nothing pending: one agreement per proposal
    assert outcome_at(session, START, review_submitted("acme/api", 1, "approved")) == []


def test_a_disagreement_streak_demotes(tmp_path: Path) -> None:
    rollout = (
        'rollout_policy = { mode = "shadow", promotion = { min_runs = 1, '
        "max_disagreement_streak = 3 } }"
    )
    pack = write_pack(tmp_path / "p", rollout)
    s = open_session(RunOptions(manifest=pack, state_dir=pack / "state", at=START))
    try:
        run_at(s, START, review_requested("acme/api", 1, "approve"))
        outcome_at(s, START, review_submitted("acme/api", 1, "approved"))
        assert promote(pack, START, "suggest").exit_code == 0
        demoted: list[dict[str, Any]] = []
        for n in range(2, 5):
            result = run_at(s, START, review_requested("acme/api", n, "approve"))
            assert result.autonomy["effective"] == "suggest"
            demoted += [
                e for e in outcome_at(s, START, review_submitted("acme/api", n, "dismissed"))
                if "demoted" in e
            ]  # fmt: skip
        (entry,) = demoted
        assert entry["demoted"]["to"] == "shadow"
        assert "disagreement streak" in entry["demoted"]["reason"]
    finally:
        s.close()


def test_promotion_refused_without_criteria_or_rollout(tmp_path: Path) -> None:
    pack = write_pack(tmp_path / "p", 'rollout_policy = { mode = "shadow" }')
    refused = promote(pack, START, "suggest", "--json")
    assert refused.exit_code == 1
    assert "declares no criteria" in json.loads(refused.stdout)["error"]["message"]
    bad = promote(pack, START, "sometimes", "--json")
    assert bad.exit_code == 2
    assert json.loads(bad.stdout)["error"]["kind"] == "bad_input"


def test_cohorts_and_percentage_pick_a_stable_arm(tmp_path: Path) -> None:
    rollout = (
        'rollout_policy = { mode = "approval_only", percentage = 50, cohorts = ["label:bug"] }'
    )
    pack = write_pack(tmp_path / "p", rollout)
    persona = load_manifest(str(pack)).personas[0]
    seen = {"rollout": 0, "outside": 0}
    for n in range(200):
        key = f"github:acme/api:pr:{n}"
        values = cohort_values(
            "github", {}, {"pull_request": {"labels": [{"name": "bug"}, {"name": "ui"}]}}
        )
        arm = select_arm(persona.rollout_policy, key, values)
        assert arm.arm == ("rollout" if work_bucket(key) < 50 else "outside")
        seen[arm.arm] += 1
        other = select_arm(persona.rollout_policy, key, cohort_values("github", {}, {}))
        assert other.arm == "outside" and "matches none" in other.reason
    assert 70 < seen["rollout"] < 130  # a stable hash spreads keys about evenly
    # the run records the arm: act_with_approval for the rollout arm, act_with_approval
    # (the declared tier) outside: approval_only only caps what is above it
    s = open_session(RunOptions(manifest=pack, state_dir=pack / "state", at=START))
    try:
        payload = review_requested("acme/api", 3, "approve")
        payload["calls"] = []  # act_with_approval would wait for a person on the github call
        payload["pull_request"]["labels"] = [{"name": "bug"}]
        result = run_at(s, START, payload)
        assert result.autonomy["rollout"]["cohort"] in ("label:bug", None)
        assert result.autonomy["arm"] == (
            "rollout" if work_bucket("github:acme/api:pr:3") < 50 else "outside"
        )
    finally:
        s.close()


@pytest.mark.parametrize(
    ("rollout", "message"),
    [
        ('{ mode = "shadow", cohorts = ["channel:C1"] }', "cohort key 'channel' is not produced"),
        ('{ mode = "shadow", cohorts = ["label:"] }', "expected KEY:VALUE"),
        ('{ mode = "shadow", cohorts = ["two words"] }', "expected a cohort name"),
        (
            '{ mode = "shadow", promotion = { min_runs = 5, window = "soon" } }',
            "expected a positive duration",
        ),
        ('{ mode = "shadow", promotion = { window = "30d" } }', "no criterion set"),
        ('{ mode = "shadow", promotion = { min_agreement = 1.5 } }', "between 0 and 1"),
        ('{ mode = "shadow", promotion = { min_rnus = 5 } }', "did you mean 'min_runs'"),
    ],
)
def test_rollout_validation(tmp_path: Path, rollout: str, message: str) -> None:
    pack = write_pack(tmp_path / "p", f"rollout_policy = {rollout}")
    loaded = load_manifest(str(pack))
    assert not loaded.ok
    assert any(message in str(e) for e in loaded.errors), [str(e) for e in loaded.errors]
    assert all("rollout_policy" in e.field_path for e in loaded.errors)


def test_cohorts_need_triggers(tmp_path: Path) -> None:
    pack = write_pack(
        tmp_path / "p", 'rollout_policy = { mode = "shadow", cohorts = ["repository:a/b"] }'
    )
    text = (
        (pack / "charter.toml").read_text().replace('triggers = ["github.review_requested"]\n', "")
    )
    (pack / "charter.toml").write_text(text)
    loaded = load_manifest(str(pack))
    assert any("declares no triggers" in str(e) for e in loaded.errors)


@settings(max_examples=200, deadline=None)
@given(
    key=st.text(min_size=1, max_size=40),
    percentage=st.floats(min_value=0, max_value=100),
    mode=st.sampled_from(["shadow", "dry_run", "approval_only", "canary", "disabled"]),
)
def test_arm_is_a_pure_function_of_the_key(key: str, percentage: float, mode: str) -> None:
    policy = RolloutPolicy(mode, percentage, ())
    first, second = select_arm(policy, key), select_arm(policy, key)
    assert first == second
    assert first.arm == ("rollout" if work_bucket(key) < percentage else "outside")
    # canary caps the work outside it; every other mode caps the work inside
    assert first.capped == (
        (first.arm == "outside") if mode == "canary" else first.arm == "rollout"
    )
    assert 0 <= first.bucket < 100


@given(total=st.integers(min_value=1, max_value=10_000), data=st.data())
def test_wilson_interval_holds_the_rate(total: int, data: st.DataObject) -> None:
    agreed = data.draw(st.integers(min_value=0, max_value=total))
    low, high = wilson(agreed, total)
    assert 0.0 <= low <= agreed / total <= high <= 1.0
    more_low, _ = wilson(agreed * 4, total * 4)
    if 0 < agreed < total:
        assert more_low >= low - 1e-12  # more evidence at the same rate narrows from below


def test_outcome_webhook_through_serve_records_agreement(pack: Path) -> None:
    """The real server: a review_requested webhook runs the shadow reviewer, the
    pull_request_review webhook that follows settles its proposal."""
    import os
    import signal
    import subprocess
    import time
    import urllib.request

    from .conftest import charter_argv

    def post(base: str, event: str, body: dict[str, Any]) -> int:
        request = urllib.request.Request(
            f"{base}/hooks/github", data=json.dumps(body).encode(), method="POST"
        )
        request.add_header("Content-Type", "application/json")
        request.add_header("X-GitHub-Event", event)
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)

    env = {k: v for k, v in os.environ.items() if not k.startswith("CHARTER_WEBHOOK_SECRET")}
    argv = charter_argv(
        "serve", "--port", "0", "--manifest", str(pack), "--state-dir", str(pack / "state"),
        "--insecure-accept-unsigned", "github",  # (unsigned on purpose: no secret here)
    )  # fmt: skip
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("listening on http://127.0.0.1:"), first + proc.stderr.read()
        base = first.split()[2]
        assert post(base, "pull_request", review_requested("acme/web", 7, "approve")) == 202
        assert post(base, "pull_request_review", review_submitted("acme/web", 7, "approved")) == 202
        from charter.runtime import open_event_log

        agreement: list[Any] = []
        for _ in range(400):  # waits for the event, not for a duration
            log = open_event_log(state_dir=pack / "state")
            try:
                agreement = [
                    e for e in log.iter_all(persona="reviewer")
                    if e.kind == "persona.rollout.agreement"
                ]  # fmt: skip
            finally:
                log.close()
            if agreement:
                break
            time.sleep(0.05)
        (event,) = agreement
        assert event.payload["agree"] is True and event.payload["source"] == "webhook"
        assert event.payload["work_key"] == "github:acme/web:pr:7"
        assert event.payload["trigger"] == "github.review_submitted"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def test_persona_trigger_with_an_outcome_settles_the_proposal(pack: Path, session: Session) -> None:
    run_at(session, START, review_requested("acme/api", 5, "request_changes"))
    result = invoke(
        ["persona", "trigger", "reviewer", "--provider", "github", "--kind", "review_submitted",
         "--metadata", "repository=acme/api", "--metadata", "number=5",
         "--metadata", "outcome=review:changes_requested", "--manifest", str(pack),
         "--state-dir", str(pack / "state"), "--at", "2026-10-01T12:00:00Z"]
    )  # fmt: skip
    # the reviewer declares review_requested, not review_submitted: by event and action
    # (issue 31) the trigger itself is refused (exit 1) ...
    assert result.exit_code == 1
    assert "does not declare trigger github.review_submitted" in result.output
    # ... but the outcome it reports was recorded against the proposal
    (event,) = [
        e for e in session.log.iter_all(persona="reviewer")
        if e.kind == "persona.rollout.agreement"
    ]  # fmt: skip
    assert event.payload["agree"] is True
    assert event.payload["predicted"] == "review:changes_requested"


def test_rollout_evidence_on_postgres(tmp_path: Path) -> None:
    """The same promotion on the PostgreSQL backend (snapshots under ``reviewer#rollout``)."""
    import os
    import uuid

    from charter.runtime import EventLogError, PostgresEventLog

    base = os.environ.get("CHARTER_TEST_PG_URL", "postgresql://127.0.0.1:5432/test")
    url = f"{base}?schema=charter_rollout_{uuid.uuid4().hex[:12]}"
    try:
        probe = PostgresEventLog(url)
    except EventLogError as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"PostgreSQL unreachable: {exc}")
        pytest.skip(f"PostgreSQL unreachable: {exc}")
    rollout = (
        'rollout_policy = { mode = "shadow", promotion = { min_runs = 3, min_agreement = 0.2 } }'
    )
    pack = write_pack(tmp_path / "p", rollout)
    s = open_session(RunOptions(manifest=pack, state_url=url, at=START))
    try:
        for n in range(1, 4):
            run_at(s, START, review_requested("acme/api", n, "approve"))
            outcome_at(s, START, review_submitted("acme/api", n, "approved"))
        result = invoke(
            ["persona", "promote", "reviewer", "--to", "suggest", "--manifest", str(pack),
             "--state", url, "--at", "2026-10-01T10:00:00Z", "--json"]
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        after = run_at(s, START, review_requested("acme/api", 9, "approve"))
        assert after.autonomy["effective"] == "suggest"
        from charter.run import evidence

        assert (
            evidence.load(s.log, "reviewer").to_dict()
            == evidence.rebuild(s.log, "reviewer").to_dict()
        )
    finally:
        s.close()
        probe.drop_schema()
        probe.close()


def test_every_head_of_a_pull_request_is_in_one_arm() -> None:
    """Issue 31 keyed a pull request's heads, reviews and comments apart; the rollout
    arm follows the pull request, not the head."""
    base = "github:acme/api:pr:3"
    keys = [base, f"{base}:{'a' * 40}", f"{base}:{'b' * 40}", f"{base}:review:7"]
    assert {work_bucket(k) for k in keys} == {work_bucket(base)}
