"""Handoffs produced by a workflow are routed by [[handoff_routes]]; the receiving run
adopts a policy_override as its top frame (a replacement, not a merge)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .conftest import envelope, executed, invoke, persona_cli, persona_toml, run_json

OVERRIDE = 'tools = ["read", "github"], side_effect_level = "read_only"'
ROUTES = f"""
[[handoff_routes]]
id = "findings"
kind = "findings"
from = "actor"
custom_predicates = ["blocking"]
route = [
  {{ target = "human:maintainers", when = "blocking" }},
  {{ target = "budget_exhausted_sink", when = "budget_exhausted" }},
  {{ target = "other", when = "always", policy_override = {{ {OVERRIDE} }} }},
]
"""


def _pack(make_pack: Callable[..., Path]) -> Path:
    return make_pack(
        persona_toml(handoffs='["other", "human:maintainers", "budget_exhausted_sink"]'),
        persona_toml("other"),
        persona_toml("budget_exhausted_sink", tier="shadow"),
        routes=ROUTES,
    )


def test_route_override_replaces_the_receiving_policy(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    pack = _pack(make_pack)
    plan = {"calls": [{"tool": "github", "args": {"action": "merge", "pr": 9}}]}
    handoff_plan = {
        "handoffs": [{"kind": "findings", "payload": {"plan": plan}, "facts": {"blocking": False}}]
    }
    first = run_json(pack, "actor", "--payload", str(envelope(tmp_path / "e.json", handoff_plan)))
    (dispatched,) = first["handoffs"]
    assert dispatched["status"] == "dispatched" and dispatched["target"] == "other"
    assert dispatched["policy_override"] == {
        "tools": {"allow": ["read", "github"]},
        "side_effect_level": "read_only",
    }
    status = persona_cli(pack, "status", "other", "--json", "--at", "2026-11-21T09:00:00Z")
    assert '"count": 1' in status.stdout  # in other's inbox
    second = run_json(pack, "other", "--inbox")
    (run,) = second["runs"]
    assert run["trigger"]["source"] == "handoff"
    (denied,) = run["denied"]
    # "other" is act_auto and its own policy allows github: only the override denies it
    assert denied["receipt"]["frame"] == f"handoff:{dispatched['handoff_id']}"
    assert denied["receipt"]["dimension"] == "side_effect_level"
    assert executed(pack) == []


def test_custom_predicate_from_workflow_facts(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    pack = _pack(make_pack)
    plan = {"handoffs": [{"kind": "findings", "facts": {"blocking": True}}]}
    data = run_json(pack, "actor", "--payload", str(envelope(tmp_path / "e.json", plan)))
    (dispatched,) = data["handoffs"]
    assert dispatched["target"] == "human:maintainers" and dispatched["when"] == "blocking"


def test_budget_exhausted_predicate_sees_this_run(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    import json

    pack = make_pack(
        persona_toml(
            handoffs='["other", "human:maintainers", "budget_exhausted_sink"]',
            budget="{ max_tokens = 10 }",
        ),
        persona_toml("other"),
        persona_toml("budget_exhausted_sink", tier="shadow"),
        routes=ROUTES,
    )
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": ["done"]}))
    plan = {"agent": "go", "handoffs": [{"kind": "findings"}]}
    # a handoff asked for after the stopped agent call is never asked for
    data = run_json(
        pack,
        "actor",
        "--llm",
        f"mock:{script}",
        "--payload",
        str(envelope(tmp_path / "e.json", plan)),
        code=1,
    )
    assert data["status"] == "budget_exhausted" and data["handoffs"] == []
    plan = {"handoffs": [{"kind": "findings"}], "handoffs_first": True, "agent": "go"}
    data = run_json(
        pack,
        "actor",
        "--llm",
        f"mock:{script}",
        "--payload",
        str(envelope(tmp_path / "e2.json", plan, ident="2")),
        code=1,
    )
    (dispatched,) = data["handoffs"]
    assert dispatched["target"] == "budget_exhausted_sink"
    assert dispatched["when"] == "budget_exhausted"


def test_unrouted_handoff_is_reported(make_pack: Callable[..., Path], tmp_path: Path) -> None:
    pack = _pack(make_pack)
    plan = {"handoffs": [{"kind": "nobody_routes_this"}]}
    data = run_json(pack, "actor", "--payload", str(envelope(tmp_path / "e.json", plan)))
    (item,) = data["handoffs"]
    assert item["status"] == "unrouted" and "no handoff route" in item["error"]


def test_human_handoff_lands_in_the_inbox_and_is_acknowledged_once(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    """issue 16: a human: target is an item a person sees, with payload and cause."""
    import json

    from .conftest import invoke

    pack = _pack(make_pack)
    plan = {
        "handoffs": [
            {"kind": "findings", "payload": {"pr": 41, "why": "flaky"}, "facts": {"blocking": True}}
        ]
    }
    data = run_json(pack, "actor", "--payload", str(envelope(tmp_path / "e.json", plan)))
    (dispatched,) = data["handoffs"]
    state = ["--state-dir", str(pack / "state")]

    def inbox(*args: str) -> Any:
        return invoke(["inbox", *args, *state])

    listed = json.loads(inbox("list", "--json").stdout)["items"]
    (item,) = listed
    assert item["group"] == "maintainers" and item["persona"] == "actor"
    assert item["payload"] == {"pr": 41, "why": "flaky", "run_id": data["run_id"]}
    assert item["handoff_id"] == dispatched["handoff_id"]
    assert item["caused_by"]["kind"] == "persona.handoff.dispatched"
    assert json.loads(inbox("list", "--group", "ops", "--json").stdout)["items"] == []
    shown = inbox("show", item["item_id"])
    assert shown.exit_code == 0 and "flaky" in shown.output and "open" in shown.output

    # the console shows it, and its acknowledge button needs the token and the CSRF token
    from starlette.testclient import TestClient

    from charter.run import RunOptions
    from charter.run.web import Access, build_app

    token = "console-token-for-the-inbox-test-0123456789"
    access = Access({token: "erin"})
    client = TestClient(
        build_app(RunOptions(manifest=pack, state_dir=pack / "state"), access=access)
    )
    auth = {"Authorization": f"Bearer {token}"}
    assert "flaky" in client.get("/console/inbox", headers=auth).text
    url = f"/api/inbox/{item['item_id']}/ack"
    assert client.post(url, data={"note": "x"}).status_code == 401
    assert client.post(url, data={"note": "x"}, headers=auth).status_code == 403
    assert json.loads(inbox("list", "--json").stdout)["items"]  # still open

    csrf = access.csrf_token("erin")
    acked = client.post(
        url, data={"csrf": csrf, "note": "on it"}, headers={**auth, "accept": "application/json"}
    )
    assert acked.status_code == 200, acked.text
    assert acked.json()["by"] == "console:erin"
    again = inbox("ack", item["item_id"], "--by", "dana", "--json")
    assert again.exit_code == 1
    assert "already acknowledged by console:erin" in json.loads(again.stdout)["error"]["message"]
    assert json.loads(inbox("list", "--json").stdout)["items"] == []
    (everything,) = json.loads(inbox("list", "--all", "--json").stdout)["items"]
    assert everything["acknowledged"]["note"] == "on it"
    missing = inbox("show", "inbox_nope", "--json")
    assert missing.exit_code == 2 and json.loads(missing.stdout)["error"]["kind"] == "not_found"
    # both events are in the supervision feed
    feed = invoke(["persona", "supervision", "tail", *state]).output
    assert "persona.human_inbox.created" in feed and "persona.human_inbox.acknowledged" in feed


def test_worker_target_runs_the_named_persona_through_admission(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    """issue 16: worker://NAME arrives (NAME's inbox, its own policy) instead of only
    being recorded as dispatched; issue 31: a worker naming no persona is refused by
    ``persona check`` (it failed only at dispatch, the run reporting completed)."""
    routes = """
[[handoff_routes]]
id = "jobs"
kind = "job"
from = "actor"
route = [ { target = "worker://other", when = "always" } ]
"""
    lost = """
[[handoff_routes]]
id = "lost"
kind = "lost"
from = "actor"
route = [ { target = "worker://nobody", when = "always" } ]
"""
    broken = make_pack(
        persona_toml(handoffs='["worker://other", "worker://nobody"]'),
        persona_toml("other"),
        routes=routes + lost,
    )
    checked = invoke(["persona", "check", str(broken), "--json"])
    assert checked.exit_code == 1, checked.output
    messages = [e["message"] for e in json.loads(checked.stdout)["errors"]]
    assert sum("'worker://nobody'" in m or "'nobody'" in m for m in messages) == 2, messages
    pack = make_pack(
        persona_toml(handoffs='["worker://other"]'), persona_toml("other"), routes=routes
    )
    plan = {"calls": [{"tool": "github", "args": {"action": "merge", "pr": 5}}]}
    first = run_json(
        pack,
        "actor",
        "--payload",
        str(
            envelope(
                tmp_path / "e.json", {"handoffs": [{"kind": "job", "payload": {"plan": plan}}]}
            )
        ),
    )
    (dispatched,) = first["handoffs"]
    assert dispatched["target"] == "worker://other"
    (run,) = run_json(pack, "other", "--inbox")["runs"]
    assert run["status"] == "completed" and run["trigger"]["source"] == "handoff"
    assert executed(pack) == [{"action": "merge", "pr": 5}]  # other's own policy allows it
