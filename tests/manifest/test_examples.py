"""The template pack: valid, conservative, and every file it names exists."""

from __future__ import annotations

import importlib.util
import json
import tomllib

from charter.manifest import AutonomyTier, load_manifest

from .conftest import EXAMPLES


def test_pack_is_valid_and_complete() -> None:
    manifest = load_manifest(EXAMPLES, include_global=False)
    assert manifest.ok, manifest.errors
    assert manifest.names == ("merge_captain", "review_captain", "oncall_captain")
    for persona in manifest.personas:
        assert persona.autonomy_tier is not AutonomyTier.ACT_AUTO
        assert persona.rollout_policy.mode in ("approval_only", "dry_run", "shadow")
        assert persona.model_policy.default_model and persona.model_policy.escalation_model
        assert persona.instructions is not None
        for pack in persona.context_packs:
            assert (EXAMPLES / "context" / f"{pack}.md").is_file(), pack
        for name in persona.evals:
            data = tomllib.loads((EXAMPLES / "evals" / f"{name}.toml").read_text())
            assert data["persona"] == persona.name
            assert (EXAMPLES / "evals" / data["fixture"]).resolve().is_file()
        assert persona.entry_workflow.path is not None
        spec = importlib.util.spec_from_file_location(
            f"wf_{persona.name}", EXAMPLES / persona.entry_workflow.path
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        result = getattr(module, persona.entry_workflow.function)(None)
        assert result["dry_run"] is True


def test_pack_uses_placeholder_secrets_only() -> None:
    for path in EXAMPLES.rglob("persona.json"):
        text = json.dumps(json.loads(path.read_text()))
        for value in json.loads(path.read_text()).get("mcpServers", {}).values():
            for secret in value.get("env", {}).values():
                assert secret.startswith("${") and secret.endswith("}"), (path, secret)
        assert "ghp_" not in text
