"""Budgets hold during the run: worst-case reservation before each model call."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from charter.run import RunOptions, run_persona

from .conftest import AT, envelope, events, kinds, persona_cli, persona_toml, run_json

AGENT = {"agent": "Do the work.", "agent_tools": ["github", "read"]}


def _script(path: Path, turns: list[Any]) -> str:
    path.write_text(json.dumps({"turns": turns}))
    return f"mock:{path}"


def _turn(input_tokens: int, output_tokens: int = 0, **extra: Any) -> dict[str, Any]:
    return {"usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}, **extra}


@pytest.mark.parametrize(
    ("budget", "reason"),
    [
        ("{ run_usd = 0.5 }", "run_usd"),
        ("{ hourly_usd = 0.5 }", "hourly_usd"),
        ("{ daily_usd = 0.5 }", "daily_usd"),
        ("{ max_tokens = 500 }", "max_tokens"),
    ],
)
def test_each_cap_stops_the_run_mid_way(
    make_pack: Callable[..., Path], tmp_path: Path, budget: str, reason: str
) -> None:
    # m-small costs $0.001/token; the first call uses 300 tokens ($0.30); the second call's
    # worst case (its input estimate + 100 output tokens) would cross the cap.
    pack = make_pack(persona_toml(budget=budget))
    llm = _script(
        tmp_path / "s.json",
        [
            _turn(
                250, 50, tool_calls=[{"name": "read", "arguments": {"path": "context/rules.md"}}]
            ),
            _turn(10, 10, text="done"),
        ],
    )
    plan_file = envelope(tmp_path / "e.json", AGENT)
    data = run_json(pack, "actor", "--llm", llm, "--payload", str(plan_file), code=1)
    assert data["status"] == "budget_exhausted"
    stop = data["budget_stop"]
    assert stop["reason"] == reason and stop["during_run"] is True and stop["receipt_id"]
    assert data["budget"]["model_calls"] == 1
    assert data["budget"]["run_tokens"] == 300
    # the cost so far is charged to the persona, and the exhaustion is on its status
    status = json.loads(
        persona_cli(pack, "status", "actor", "--json", "--at", "2026-11-21T09:00:00Z").stdout
    )
    assert status["budget"]["spent"]["total_tokens"] == 300
    assert status["budget"]["exhaustion_reason"] == reason
    assert status["lifecycle"] == "failed"
    exhausted = [e for e in events(pack) if e["kind"] == "persona.budget.exhausted"]
    assert exhausted[-1]["payload"]["receipt_id"] == stop["receipt_id"]


def test_within_budget_usage_is_recorded_per_call(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    pack = make_pack(persona_toml(budget="{ run_usd = 5.0 }"))
    llm = _script(tmp_path / "s.json", [_turn(100, 20, text="done")])
    data = run_json(
        pack, "actor", "--llm", llm, "--payload", str(envelope(tmp_path / "e.json", AGENT))
    )
    assert data["status"] == "completed"
    assert data["budget"]["run_usd"] == pytest.approx(0.12)
    reserved, used = data["receipts"]
    assert reserved["kind"] == "persona.budget.reserved" and reserved["model"] == "m-small"
    assert reserved["max_output_tokens"] == 100
    assert used["kind"] == "persona.usage.recorded" and used["cost_usd"] == pytest.approx(0.12)


def test_admission_refuses_when_already_exhausted(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    pack = make_pack(persona_toml(budget="{ daily_usd = 0.1 }"))
    spent = persona_cli(pack, "spend", "actor", "--cost-usd", "0.1", "--at", "2026-11-21T08:00:00Z")
    assert spent.exit_code == 0, spent.output
    data = run_json(pack, "actor", "--payload", str(envelope(tmp_path / "e.json", AGENT)), code=1)
    assert data["status"] == "budget_exhausted"
    assert data["budget_stop"]["during_run"] is False
    assert data["budget_stop"]["reason"] == "daily_usd"
    assert "persona.run.started" not in kinds(pack)


def test_deadline_zero_stops_before_the_first_call(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    pack = make_pack(persona_toml(budget="{ max_runtime_seconds = 0 }"))
    llm = _script(tmp_path / "s.json", [_turn(1, 1, text="done")])
    data = run_json(
        pack, "actor", "--llm", llm, "--payload", str(envelope(tmp_path / "e.json", AGENT)), code=1
    )
    assert data["budget_stop"]["reason"] == "max_runtime_seconds"
    assert data["budget"]["model_calls"] == 0


def test_deadline_crossed_mid_run(make_pack: Callable[..., Path], tmp_path: Path) -> None:
    pack = make_pack(persona_toml(budget="{ max_runtime_seconds = 10 }"))
    ticks = iter([0.0, 11.0, 12.0, 13.0])  # an injected clock: one reading per check
    script = [
        _turn(5, 5, tool_calls=[{"name": "read", "arguments": {"path": "context/rules.md"}}]),
        _turn(5, 5, text="done"),
    ]
    result = run_persona(
        "actor",
        provider="test",
        kind="go",
        metadata={"id": "1"},
        payload=AGENT,
        options=RunOptions(
            manifest=pack,
            state_dir=pack / "state",
            at=datetime(2026, 11, 21, 9, tzinfo=UTC),
            llm=_script(tmp_path / "s.json", script),
            elapsed=lambda: next(ticks),
        ),
    )
    assert result.status == "budget_exhausted"
    assert result.budget_stop is not None
    assert result.budget_stop["reason"] == "max_runtime_seconds"
    assert result.budget["model_calls"] == 1


def test_unpriced_model_warns_or_fails_in_strict_mode(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    plan_file = envelope(tmp_path / "e.json", AGENT)
    llm = _script(tmp_path / "s.json", [_turn(1, 1, text="done")])
    pack = make_pack()
    data = run_json(pack, "actor", "--llm", llm, "--model", "unpriced", "--payload", str(plan_file))
    assert data["status"] == "completed"
    assert any("has no price" in w for w in data["warnings"])
    pack = make_pack(strict="true")
    data = run_json(
        pack, "actor", "--llm", llm, "--model", "unpriced", "--payload", str(plan_file), code=1
    )
    assert data["status"] == "failed" and "strict" in data["error"]


def test_escalation_counts_against_frontier_escalations(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    pack = make_pack(persona_toml(budget="{ frontier_escalations = 0 }"))
    llm = _script(tmp_path / "s.json", [_turn(1, 1, text="done")])
    plan = {**AGENT, "escalate": True}
    data = run_json(
        pack, "actor", "--llm", llm, "--payload", str(envelope(tmp_path / "e.json", plan))
    )
    refused = [r for r in data["receipts"] if r["kind"] == "persona.model.escalation_refused"]
    assert refused and refused[0]["model"] == "m-small"
    pack = make_pack(persona_toml(budget="{ frontier_escalations = 1 }"))
    data = run_json(
        pack, "actor", "--llm", llm, "--payload", str(envelope(tmp_path / "e.json", plan))
    )
    assert data["budget"]["by_model"]["m-big"]["calls"] == 1


def test_fallback_model_on_provider_error(make_pack: Callable[..., Path], tmp_path: Path) -> None:
    pack = make_pack()
    llm = _script(
        tmp_path / "s.json",
        [{"error": {"category": "server", "message": "overloaded"}}, _turn(1, 1, text="done")],
    )
    data = run_json(
        pack, "actor", "--llm", llm, "--payload", str(envelope(tmp_path / "e.json", AGENT))
    )
    assert data["status"] == "completed"
    fallback = [r for r in data["receipts"] if r["kind"] == "persona.model.fallback"]
    assert fallback[0]["model"] == "m-small" and fallback[0]["fallback"] == "m-backup"
    assert data["budget"]["by_model"]["m-backup"]["calls"] == 1


def test_provider_failure_is_a_failed_run(make_pack: Callable[..., Path], tmp_path: Path) -> None:
    """Every model (primary and fallback) failing is a failed run with the provider's error,
    exit 1 and ``last_error`` in status; it used to be ``completed``, exit 0."""
    pack = make_pack()
    failing = {"error": {"category": "auth", "message": "invalid api key"}}
    llm = _script(tmp_path / "s.json", [failing, failing, failing, failing])
    data = run_json(
        pack, "actor", "--llm", llm, "--payload", str(envelope(tmp_path / "e.json", AGENT)),
        code=1,
    )  # fmt: skip
    assert data["status"] == "failed"
    assert "model provider" in data["error"] and "invalid api key" in data["error"]
    status = json.loads(persona_cli(pack, "status", "actor", "--json", "--at", AT).stdout)
    assert "invalid api key" in status["last_error"]
