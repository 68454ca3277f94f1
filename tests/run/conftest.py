"""Shared set-up for ``charter persona run`` tests: a small pack written per test."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

PACK = Path(__file__).parent / "pack"
AT = "2026-11-21T09:00:00Z"

PERSONA = """
[[personas]]
name = "{name}"
description = "A test persona."
entry_workflow = "workflows/scripted.py:run"
tools = ["github", "read", "bash"]
autonomy_tier = "{tier}"
receipt_policy = "{receipts}"
triggers = ["test.go"]
context_packs = ["rules"]
handoffs = {handoffs}
budget = {budget}
model_policy = {{ default_model = "m-small", escalation_model = "m-big", \
  fallback_models = ["m-backup"] }}
stages = [
  {{ name = "look", allowed_tools = ["read"], side_effect_level = "read_only" }},
  {{ name = "act", allowed_tools = ["github", "bash"], side_effect_level = "network" }},
]
{extra}
"""

PRICING = """
[pricing]
strict = {strict}
default_max_output_tokens = 100

[pricing.models.m-small]
input_per_mtok = 1000.0
output_per_mtok = 1000.0

[pricing.models.m-big]
input_per_mtok = 10000.0
output_per_mtok = 10000.0

[pricing.models.m-backup]
input_per_mtok = 1000.0
output_per_mtok = 1000.0
"""


def persona_toml(
    name: str = "actor",
    *,
    tier: str = "act_auto",
    receipts: str = "required",
    budget: str = "{}",
    handoffs: str = "[]",
    extra: str = "",
) -> str:
    return PERSONA.format(
        name=name, tier=tier, receipts=receipts, budget=budget, handoffs=handoffs, extra=extra
    )


@pytest.fixture
def make_pack(tmp_path: Path) -> Callable[..., Path]:
    def make(*personas: str, routes: str = "", strict: str = "false") -> Path:
        root = tmp_path / "pack"
        if root.exists():
            shutil.rmtree(root)
        shutil.copytree(PACK, root)
        text = PRICING.format(strict=strict) + "".join(personas or (persona_toml(),)) + routes
        (root / "charter.toml").write_text(text)
        return root

    return make


def envelope(path: Path, plan: dict[str, Any], *, ident: str = "1") -> Path:
    """A trigger envelope file for provider ``test`` kind ``go``."""
    path.write_text(
        json.dumps({"provider": "test", "kind": "go", "metadata": {"id": ident}, "payload": plan})
    )
    return path


def invoke(args: list[str]) -> Result:
    from charter.cli import cli as root

    return CliRunner().invoke(root, args, catch_exceptions=False)


def persona_cli(pack: Path, command: str, *args: str) -> Result:
    """``charter persona COMMAND ... --manifest PACK --state-dir PACK/state`` in-process."""
    return invoke(
        ["persona", command, *args, "--manifest", str(pack), "--state-dir", str(pack / "state")]
    )


def approve_cli(pack: Path, command: str, *args: str) -> Result:
    return invoke([command, *args, "--state-dir", str(pack / "state")])


def run_json(pack: Path, *args: str, code: int | None = 0, at: str = AT) -> dict[str, Any]:
    result = persona_cli(pack, "run", *args, "--json", "--at", at)
    if code is not None:
        assert result.exit_code == code, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def charter_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "charter", *args]


def post_webhook(base: str, secret: str, ident: str, plan: dict[str, Any] | None = None) -> int:
    """POST a signed ``test``/``go`` webhook (``plan``: the scripted workflow's payload)
    to a serve replica at ``base``; the HTTP status."""
    import hashlib
    import hmac
    import urllib.request

    body = json.dumps({"id": ident, "type": "go", **(plan or {"calls": []})}).encode()
    request = urllib.request.Request(f"{base}/hooks/test", data=body, method="POST")
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    request.add_header("X-Hub-Signature-256", "sha256=" + digest)
    with urllib.request.urlopen(request, timeout=30) as response:
        return int(response.status)


def events(pack: Path) -> list[dict[str, Any]]:
    from charter.runtime import open_event_log

    log = open_event_log(state_dir=pack / "state")
    try:
        return [e.to_dict() for e in log.iter_all()]
    finally:
        log.close()


def kinds(pack: Path) -> list[str]:
    return [e["kind"] for e in events(pack)]


def executed(pack: Path) -> list[dict[str, Any]]:
    path = pack / "executed.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def run_subprocess(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False)
