"""Running the real coding CLIs through ``charter launch`` against the fake model server.

The CLIs are installed by ``make clis`` (pinned in tests/launch/clis_npm/package.json) into
``$CHARTER_CLIS_DIR`` or ``~/.cache/charter/clis``. Each run gets a throwaway HOME.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .fakemodel import Call, FakeModel, fake_model

HERE = Path(__file__).parent
MCP_SERVER = HERE / "mcpserver.py"
REAL_HOME = Path(pwd.getpwuid(os.getuid()).pw_dir)


def clis_bin() -> Path:
    base = os.environ.get("CHARTER_CLIS_DIR") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or REAL_HOME / ".cache") / "charter" / "clis"
    )
    return Path(base) / "node_modules" / ".bin"


def installed(tool: str) -> bool:
    return (clis_bin() / tool).exists()


def mcp_servers(*names: str) -> dict[str, Any]:
    python = shutil.which("python3") or sys.executable
    return {n: {"command": python, "args": [str(MCP_SERVER), n]} for n in names}


def write_persona(
    project: Path,
    policy: dict[str, Any] | None,
    *,
    tier: str = "act_auto",
    servers: tuple[str, ...] = (),
    server_extra: dict[str, Any] | None = None,
) -> None:
    """Persona ``p``: charter.toml (operational contract, tier) + .personas/p (policy)."""
    (project / "charter.toml").write_text(
        '[[personas]]\nname = "p"\ndescription = "test persona"\n'
        'entry_workflow = "charter.launch:run"\ncapabilities = ["fs.*"]\n'
        f'autonomy_tier = "{tier}"\nreceipt_policy = "optional"\n',
        encoding="utf-8",
    )
    folder = project / ".personas" / "p"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "AGENTS.md").write_text("You are the persona {{persona}}. MARKER-42\n")
    data: dict[str, Any] = {}
    if policy is not None:
        data["policy"] = policy
    if servers:
        data["mcpServers"] = mcp_servers(*servers)
        for spec in data["mcpServers"].values():
            spec.update(server_extra or {})
    (folder / "persona.json").write_text(json.dumps(data), encoding="utf-8")


@dataclass
class Result:
    proc: subprocess.CompletedProcess[str]
    model: FakeModel

    @property
    def tools(self) -> list[str]:
        return self.model.main_tools()

    @property
    def results(self) -> list[str]:
        return self.model.tool_results()

    def saw_overlay(self) -> bool:
        return any("MARKER-42" in json.dumps(r["body"]) for r in self.model.requests)


def _env(tool: str, home: Path, model: FakeModel, codex_home: Path) -> dict[str, str]:
    path = f"{clis_bin()}{os.pathsep}/usr/local/bin{os.pathsep}/usr/bin{os.pathsep}/bin"
    env = {"HOME": str(home), "PATH": path, "LANG": "C.UTF-8"}
    # these tests measure what each CLI enforces by itself (the sandbox is tested apart)
    env["CHARTER_LAUNCH_SANDBOX"] = "never"
    env["XDG_STATE_HOME"] = str(home / ".state")
    if tool == "claude":
        env.update(
            ANTHROPIC_BASE_URL=model.url,
            ANTHROPIC_API_KEY="sk-ant-fake",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
            IS_SANDBOX="1",
        )
    elif tool == "codex":
        codex_home.mkdir(parents=True, exist_ok=True)
        (codex_home / "config.toml").write_text(
            'model = "fake-model"\nmodel_provider = "fake"\n[model_providers.fake]\n'
            f'name = "fake"\nbase_url = "{model.url}/v1"\nenv_key = "FAKE_API_KEY"\n'
            'wire_api = "responses"\n',
            encoding="utf-8",
        )
        env.update(CODEX_HOME=str(codex_home), FAKE_API_KEY="sk-fake")
    elif tool == "gemini":
        (home / ".gemini").mkdir(parents=True, exist_ok=True)
        (home / ".gemini" / "settings.json").write_text(
            json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}})
        )
        env.update(GEMINI_API_KEY="fake-key", GOOGLE_GEMINI_BASE_URL=model.url)
    elif tool == "opencode":
        env.update(
            XDG_CONFIG_HOME=str(home / ".config"),
            XDG_DATA_HOME=str(home / ".local" / "share"),
            XDG_CACHE_HOME=str(home / ".cache"),
            OPENCODE_DISABLE_AUTOUPDATE="1",
            OPENCODE_DISABLE_MODELS_FETCH="1",
            OPENCODE_DISABLE_LSP_DOWNLOAD="1",
            OPENCODE_CONFIG_CONTENT=json.dumps(
                {
                    "provider": {
                        "fake": {
                            "npm": "@ai-sdk/openai-compatible",
                            "name": "Fake",
                            "options": {"baseURL": f"{model.url}/v1", "apiKey": "sk-fake"},
                            "models": {"fake-model": {"name": "Fake", "tool_call": True}},
                        }
                    },
                    "model": "fake/fake-model",
                    "autoupdate": False,
                    "share": "disabled",
                }
            ),
        )
    return env


HEADLESS = {
    "claude": ["-p", "hi", "--output-format", "json"],
    "codex": ["exec", "--skip-git-repo-check", "hi"],
    "gemini": ["-p", "hi", "-o", "json", "--skip-trust"],
    "opencode": ["run", "hi"],
}


def launch(
    tool: str,
    project: Path,
    *,
    launcher: tuple[str, ...] = (),
    call: Call | None = None,
    timeout: float = 240,
) -> Result:
    """``charter launch TOOL p [launcher options] -- <headless args>`` against a fake model."""
    home = Path(tempfile.mkdtemp(prefix=f"home-{tool}-", dir=project.parent))
    # codex cannot create its sandbox helper under /tmp: keep CODEX_HOME elsewhere.
    scratch = REAL_HOME / ".cache" / "charter" / "test-homes"
    scratch.mkdir(parents=True, exist_ok=True)
    codex_home = Path(tempfile.mkdtemp(prefix="codex-", dir=scratch))
    try:
        with fake_model(call) as model:
            env = _env(tool, home, model, codex_home)
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "charter",
                    "launch",
                    tool,
                    "p",
                    *launcher,
                    "--",
                    *HEADLESS[tool],
                ],
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
            return Result(proc, model)
    finally:
        shutil.rmtree(codex_home, ignore_errors=True)
