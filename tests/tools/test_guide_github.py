"""docs/guide-github.md, followed as a new user would: its commands, in order, against the
fakes of charter.testing (the GitHub App registered and installed on the fake, a model
scripted through CHARTER_LLM). The test plays only what the guide does in a browser:
downloading the App's key and GitHub delivering the webhook."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from charter.testing import FakeApp, FakeGitHub

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guide-github.md"
HEAD = "3f1c9a7e5b2d4c6e8a0b1c2d3e4f5a6b7c8d9e0f"
DIFF = """diff --git a/src/app.py b/src/app.py
--- a/src/app.py
+++ b/src/app.py
@@ -10,3 +10,4 @@ def handler(event):
     payload = event["body"]
-    return process(payload)
+    data = json.loads(payload)
+    return process(data)
"""
SCRIPT = {
    "turns": [
        {"tool_calls": [{"name": "github_get_diff", "arguments": {"number": 1}}]},
        "Findings: json.loads without error handling. Not blocking.",
        {
            "tool_calls": [
                {
                    "name": "github_post_review",
                    "arguments": {
                        "number": 1,
                        "event": "COMMENT",
                        "commit_id": HEAD,
                        "body": "One suggestion.",
                        "comments": [
                            {
                                "path": "src/app.py",
                                "line": 11,
                                "side": "RIGHT",
                                "body": "json.loads raises on bad input: answer 400 instead?",
                            }
                        ],
                    },
                }
            ]
        },
        "Review posted.",
    ]
}


def blocks(text: str) -> list[tuple[str, str]]:
    """The guide's ```sh blocks in order, each with the step (## heading) it is in."""
    out: list[tuple[str, str]] = []
    heading = ""
    for part in re.split(r"(?m)^(## .*)$", text):
        if part.startswith("## "):
            heading = part
            continue
        for block in re.findall(r"(?ms)^```sh\n(.*?)^```", part):
            out.append((heading, block))
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_block(block: str, cwd: Path, env: dict[str, str], env_file: Path) -> tuple[int, str]:
    # each block in a fresh bash with the environment the earlier blocks exported
    script = (
        "set -eo pipefail\n" + block + "\n"
        f'{sys.executable} -c "import json, os; json.dump(dict(os.environ), '
        f"open('{env_file}', 'w'))\"\n"
    )
    proc = subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if env_file.exists():
        env.clear()
        env.update(json.loads(env_file.read_text()))
        env_file.unlink()
    return proc.returncode, proc.stdout + proc.stderr


def deliver(port: int, secret: str, payload: dict[str, Any]) -> int:
    body = json.dumps(payload).encode()
    sig = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/hooks/github",
        data=body,
        method="POST",
        headers={
            "X-GitHub-Event": "pull_request",
            "X-GitHub-Delivery": "d-1",
            "X-Hub-Signature-256": sig,
            "Content-Type": "application/json",
        },
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return int(resp.status)


def status(cwd: Path, env: dict[str, str]) -> dict[str, Any]:
    proc = subprocess.run(
        ["charter", "persona", "status", "review_captain", "--json"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(proc.stdout))


def test_follow_the_guide_against_the_fakes(tmp_path: Path) -> None:
    home, repo = tmp_path / "home", tmp_path / "your-repo"
    (home / "Downloads").mkdir(parents=True)
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    # step 2 in the browser: the App exists, is installed on the repository, key downloaded
    (home / "Downloads" / "acme-review-captain.2026-11-28.private-key.pem").write_text(pem)
    script = tmp_path / "model.json"
    script.write_text(json.dumps(SCRIPT))
    port = free_port()
    gh = FakeGitHub(tokens=[], app=FakeApp(123456, pem, {"your-org/your-repo": 4711}))
    gh.add_pull("your-org/your-repo", 1, HEAD, diff=DIFF, title="parse the body as JSON")
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(
        {
            "HOME": str(home),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            "CHARTER_SRC": str(ROOT),
            "GITHUB_API_URL": "",  # set below, once the fake listens
            "CHARTER_LLM": f"mock:{script}",
        }
    )
    env_file = tmp_path / "env.json"
    outputs: dict[str, str] = {}
    serve: subprocess.Popen[str] | None = None
    with gh:
        env["GITHUB_API_URL"] = gh.url
        try:
            for heading, block in blocks(GUIDE.read_text()):
                if block.lstrip().startswith("charter serve"):
                    # step 7: the guide starts the server; GitHub then delivers the webhook
                    argv = block.split()[:]
                    argv[argv.index("--port") + 1] = str(port)
                    serve = subprocess.Popen(
                        argv,
                        cwd=repo,
                        env=env,
                        text=True,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT,
                    )
                    wait_healthy(port, serve)
                    before = status(repo, env)["last_run"]["run_id"]
                    assert deliver(port, env["CHARTER_WEBHOOK_SECRET_GITHUB"], webhook()) == 202
                    outputs["webhook_run"] = wait_for_run(repo, env, before, serve)
                    continue
                code, out = run_block(block, repo, env, env_file)
                outputs[heading] = outputs.get(heading, "") + out
                assert code == 0, f"{heading}\n{block}\n---\n{out}"
        finally:
            if serve is not None:
                serve.terminate()
                serve.wait(timeout=30)
    doctor = outputs["## 4. Tell charter where everything is"]
    assert "[ok  ] github:app: App 123456" in doctor, doctor
    assert (
        "[ok  ] github:installation: installed on your-org/your-repo (installation 4711)" in doctor
    )
    assert "[ok  ] github:webhook_secret" in doctor
    manual = outputs["## 6. One pull request by hand, in shadow"]
    assert "tier=shadow" in manual and "dry run:    call_1 github_post_review" in manual
    assert "would send: POST /repos/your-org/your-repo/pulls/1/reviews" in manual
    assert '"path": "src/app.py", "line": 11, "side": "RIGHT"' in manual
    # shadow: the reads reached GitHub with an installation token, the review never did
    assert gh.requests_to("POST", "/repos/your-org/your-repo/pulls/1/reviews") == []
    reads = gh.requests_to("GET", "/repos/your-org/your-repo/pulls/1")
    assert len(reads) >= 4  # two per run: the PR (head SHA) and its diff
    assert all(r.headers["authorization"].startswith("token ghs_") for r in reads)
    assert gh.requests_to("POST", "/app/installations/4711/access_tokens")
    assert outputs["webhook_run"] == "completed"
    report = outputs["## 8. Shadow first, then read the rollout report"]
    assert "review_captain" in report
    assert "not yet" in outputs["## 9. Promotion"]


def webhook() -> dict[str, Any]:
    return {
        "action": "review_requested",
        "number": 1,
        "pull_request": {
            "number": 1,
            "head": {"sha": HEAD, "ref": "json-body"},
            "base": {"ref": "main"},
            "state": "open",
        },
        "requested_reviewer": {"login": "acme-review-captain[bot]"},
        "repository": {"full_name": "your-org/your-repo"},
        "installation": {"id": 4711},
        "sender": {"login": "octocat"},
    }


def wait_healthy(port: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(
                f"charter serve exited: {proc.stdout.read() if proc.stdout else ''}"
            )
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError("charter serve did not come up")


def wait_for_run(cwd: Path, env: dict[str, str], before: str, serve: subprocess.Popen[str]) -> str:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        last = status(cwd, env).get("last_run") or {}
        if last.get("run_id") not in (None, before) and last.get("status") != "running":
            return str(last.get("status"))
        time.sleep(0.5)
    serve.terminate()
    out = serve.stdout.read() if serve.stdout else ""
    raise AssertionError(f"the webhook's run did not finish; charter serve said:\n{out}")
