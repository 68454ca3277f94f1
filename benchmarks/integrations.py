"""What charter.tools adds to a GitHub call: the tool against a raw HTTP request.

Run: ``python benchmarks/integrations.py [calls] [--rounds N]``.

Both sides read the same pull request from the same :class:`charter.testing.FakeGitHub`
on 127.0.0.1, alternating round by round so they see the same machine load:

- ``tool``: ``github_get_pull_request`` as a model's call reaches it (githubkit client,
  auth, stamina retry context, typed-error mapping, redaction of the result);
- ``raw``: one ``httpx.AsyncClient`` GET with the same token and a shared TLS context
  (the floor: a client, the fake's own time and the HTTP round trip).

Also the import cost of ``charter.tools`` (which must stay light: the SDKs load on the
first call) next to ``charter.agent`` (which it needs for ``Tool``) and ``githubkit``.
Medians over the rounds are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from typing import Any

import httpx

from charter.testing import FakeGitHub
from charter.tools import GitHubClient, IntegrationSettings, github_tools

TOKEN = "ghp_bench"
HEAD = "a" * 40


def _import_ms(module: str) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout) * 1000


async def _tool_round(tool: Any, calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        result = await tool.handler(number=1)
        assert result["status"] == "ok", result
    return (time.perf_counter() - started) / calls * 1000


async def _raw_round(url: str, calls: int, verify: Any) -> float:
    headers = {"Authorization": f"token {TOKEN}", "Accept": "application/vnd.github+json"}
    started = time.perf_counter()
    for _ in range(calls):
        async with httpx.AsyncClient(verify=verify) as client:
            response = await client.get(f"{url}/repos/octo/app/pulls/1", headers=headers)
        assert response.status_code == 200
        response.json()
    return (time.perf_counter() - started) / calls * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("calls", type=int, nargs="?", default=100)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with FakeGitHub(tokens=[TOKEN]) as gh:
        gh.add_pull("octo/app", 1, HEAD, diff="")
        settings = IntegrationSettings.load({"GITHUB_API_URL": gh.url, "GITHUB_TOKEN": TOKEN})
        tool = next(
            t
            for t in github_tools(GitHubClient(settings.github, "octo/app"))
            if t.name == "github_get_pull_request"
        )
        asyncio.run(_tool_round(tool, 5))  # warm: SDK imports, first client
        verify = httpx.create_ssl_context()
        tool_ms: list[float] = []
        raw_ms: list[float] = []
        for _ in range(args.rounds):
            tool_ms.append(asyncio.run(_tool_round(tool, args.calls)))
            raw_ms.append(asyncio.run(_raw_round(gh.url, args.calls, verify)))
    tool_med, raw_med = statistics.median(tool_ms), statistics.median(raw_ms)
    print(f"per call, median of {args.rounds} rounds x {args.calls} calls (alternating):")
    print(f"  github_get_pull_request tool  {tool_med:7.2f} ms")
    print(f"  raw httpx GET (baseline)      {raw_med:7.2f} ms")
    print(
        f"  charter.tools + githubkit add {tool_med - raw_med:7.2f} ms ({tool_med / raw_med:.2f}x)"
    )
    imports = {
        m: statistics.median(_import_ms(m) for _ in range(3))
        for m in ("charter.agent", "charter.tools", "githubkit")
    }
    print("import (fresh process, median of 3):")
    for module, ms in imports.items():
        print(f"  import {module:<14} {ms:7.1f} ms")


if __name__ == "__main__":
    main()
