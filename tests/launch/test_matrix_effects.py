"""The matrix proves itself (issue 30): one effect test per cell rated strong.

Generated from :func:`charter.launch.matrix.matrix`: for every policy element x CLI cell
the matrix rates ``strong``, the real CLI is launched by ``charter launch`` (the default
``--sandbox auto``, as the matrix assumes) against the fake model on 127.0.0.1 with the
cell's own sample policy, and the *effect* is checked: a hostile action the cell says
is stopped (a denied tool the model is offered, a denied file whose content reaches the
model, a write that lands on the host, a second local server the shell reaches) and its
allowed twin, which must still work. A strong cell with no effect case fails
:func:`test_every_strong_cell_has_an_effect_test`: nothing is rated strong unproven.

Every case uses the ``act_auto`` tier (the CLI offers and runs the most there, so a
hostile check cannot pass because an approval prompt dropped the tool) and first checks
that the cell is still rated strong for that launch.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from charter.launch.matrix import SAMPLES, matrix

from . import realcli
from .conftest import charter
from .fakemodel import Call
from .realcli import REAL_HOME, Result, installed, write_persona

CELLS = [
    (element, tool)
    for element, row in matrix().items()
    for tool, cell in row.items()
    if cell["strength"] == "strong"
]

#: Per CLI: its shell tool, read tool, write tools, web tools (as offered to the model).
SHELL = {
    "claude": "Bash",
    "codex": "exec_command",
    "gemini": "run_shell_command",
    "opencode": "bash",
}
READ = {"claude": "Read", "codex": "exec_command", "gemini": "read_file", "opencode": "read"}
WRITE = {
    "claude": {"Write", "Edit"},
    "codex": set(),
    "gemini": {"write_file", "replace"},
    "opencode": {"write", "edit"},
}
WEB = {
    "claude": {"WebFetch", "WebSearch"},
    "codex": {"web_search"},
    "gemini": {"web_fetch", "google_web_search"},
    "opencode": {"webfetch", "websearch"},
}

#: A read-only tool each CLI still offers under ``side_effect_level = "read_only"``
#: (codex's shell is off then: it has no read tool of its own).
READ_ONLY = {"claude": "Read", "codex": "view_image", "gemini": "read_file", "opencode": "read"}

#: The shell script the model runs: a hostile (H) and an allowed (T) action, each
#: printing what it got. ``{...}`` are filled per case.
SCRIPT = """
import pathlib, urllib.request
def read(tag, p):
    try:
        print(tag, "READ", pathlib.Path(p).read_text().strip())
    except Exception as e:
        print(tag, "READ-ERR", type(e).__name__)
def write(tag, p):
    try:
        pathlib.Path(p).write_text("x")
        print(tag, "WRITE-OK")
    except Exception as e:
        print(tag, "WRITE-ERR", type(e).__name__)
def fetch(tag, u):
    try:
        print(tag, "NET", urllib.request.urlopen(u, timeout=5).read().decode())
    except Exception as e:
        print(tag, "NET-ERR", type(e).__name__)
{actions}
print("SCRIPT-DONE")
"""


def _shell_call(tool: str, actions: str) -> Call:
    line = "python3 -c '" + SCRIPT.format(actions=actions).replace("'", '"') + "'"
    if tool == "claude":
        return Call("Bash", {"command": line, "description": "check"})
    if tool == "gemini":
        return Call("run_shell_command", {"command": line})
    if tool == "codex":
        return Call("exec_command", {"cmd": line})
    return Call("bash", {"command": line, "description": "check"})


@dataclass
class Env:
    """What a case can point at: the repository, a file outside it, a forbidden server."""

    repo: Path
    outside: Path
    server: str


@dataclass
class Case:
    policy: dict[str, Any]
    check: Callable[[Result, Env], None]
    actions: str | None = None  # a shell script's actions (H hostile, T twin)
    servers: tuple[str, ...] = ()
    server_extra: dict[str, Any] | None = None
    tier: str = "act_auto"
    extra_runs: list[Case] = field(default_factory=list)


def _shell_policy(sample: dict[str, Any]) -> dict[str, Any]:
    # the shell may run python3 (the CLI's command rules are not what is tested here)
    return {**sample, "commands": {"allow": ["python3:*"]}}


def _results(r: Result) -> str:
    text = "\n".join(r.results)
    assert "SCRIPT-DONE" in text, f"the shell call did not run: {text[:2000]}"
    return text


def _paths_read_deny(tool: str) -> Case:
    def check(r: Result, env: Env) -> None:
        text = _results(r)
        assert "TOPSECRET" not in text and "H READ-ERR" in text
        assert "T READ PUBLIC" in text

    return Case(
        _shell_policy(SAMPLES["paths.read.deny"][0]),
        check,
        "read('H', 'secrets/x.txt')\nread('T', 'notes.txt')",
    )


def _paths_read_allow(tool: str) -> Case:
    def check(r: Result, env: Env) -> None:
        text = _results(r)
        assert "OUTSIDESECRET" not in text and "H READ-ERR" in text
        assert "T READ PUBLIC" in text

    return Case(
        _shell_policy(SAMPLES["paths.read.allow"][0]),
        check,
        "read('H', OUTSIDE)\nread('T', 'notes.txt')",
    )


def _paths_write_allow(tool: str) -> Case:
    def check(r: Result, env: Env) -> None:
        text = _results(r)
        assert not (env.repo / "top.txt").exists() and "H WRITE-ERR" in text
        assert (env.repo / "src" / "in.txt").read_text() == "x" and "T WRITE-OK" in text

    return Case(
        _shell_policy(SAMPLES["paths.write.allow"][0]),
        check,
        "write('H', 'top.txt')\nwrite('T', 'src/in.txt')",
    )


def _paths_write_deny(tool: str) -> Case:
    def check(r: Result, env: Env) -> None:
        text = _results(r)
        assert not (env.repo / "dist" / "x.txt").exists() and "H WRITE-ERR" in text
        assert (env.repo / "src" / "in.txt").read_text() == "x" and "T WRITE-OK" in text

    return Case(
        _shell_policy(SAMPLES["paths.write.deny"][0]),
        check,
        "write('H', 'dist/x.txt')\nwrite('T', 'src/in.txt')",
    )


def _network(element: str) -> Callable[[str], Case]:
    def build(tool: str) -> Case:
        def check(r: Result, env: Env) -> None:
            text = _results(r)
            assert "NETSECRET" not in text and "H NET-ERR" in text
            # the twin: the model's own endpoint (the same host, another port) is reached
            assert r.saw_overlay()

        return Case(_shell_policy(SAMPLES[element][0]), check, "fetch('H', SERVER)")

    return build


def _tools_allow(tool: str) -> Case:
    def check(r: Result, env: Env) -> None:
        assert not WRITE[tool] & set(r.tools), r.tools
        assert SHELL[tool] in r.tools, r.tools

    return Case(SAMPLES["tools.allow"][0], check)


def _tools_deny(tool: str) -> Case:
    def check(r: Result, env: Env) -> None:
        assert not WEB[tool] & set(r.tools), r.tools
        assert READ[tool] in r.tools, r.tools

    return Case(SAMPLES["tools.deny"][0], check)


def _side_effect_level(tool: str) -> Case:
    def check(r: Result, env: Env) -> None:
        assert not (WRITE[tool] | {SHELL[tool]}) & set(r.tools), r.tools
        assert READ_ONLY[tool] in r.tools, r.tools

    return Case(SAMPLES["side_effect_level"][0], check)


def _mcp(element: str) -> Callable[[str], Case]:
    def build(tool: str) -> Case:
        allowed, denied = ("github", "alpha") if element.endswith("allow") else ("alpha", "github")

        def check(r: Result, env: Env) -> None:
            names = " ".join(r.tools)
            assert f"{denied}_echo" not in names, r.tools
            assert f"{allowed}_echo" in names, r.tools

        # a loaded machine starts the stdio servers slowly: codex's per-server timeout
        extra = {"startup_timeout_sec": 90} if tool == "codex" else None
        return Case(SAMPLES[element][0], check, servers=("github", "alpha"), server_extra=extra)

    return build


def _autonomy_tier(tool: str) -> Case:
    """act_auto runs the shell without asking (the twin); shadow never writes (hostile)."""

    def ran(r: Result, env: Env) -> None:
        assert "T WRITE-OK" in _results(r)
        assert (env.repo / "src" / "in.txt").exists()

    def held(r: Result, env: Env) -> None:
        assert not (env.repo / "src" / "shadow.txt").exists(), "\n".join(r.results)

    shadow = Case({}, held, "write('H', 'src/shadow.txt')", tier="shadow")
    return Case({}, ran, "write('T', 'src/in.txt')", extra_runs=[shadow])


EFFECTS: dict[str, Callable[[str], Case]] = {
    "tools.allow": _tools_allow,
    "tools.deny": _tools_deny,
    "side_effect_level": _side_effect_level,
    "paths.read.deny": _paths_read_deny,
    "paths.read.allow": _paths_read_allow,
    "paths.write.allow": _paths_write_allow,
    "paths.write.deny": _paths_write_deny,
    "network.deny": _network("network.deny"),
    "network.allow": _network("network.allow"),
    "mcp_servers.allow": _mcp("mcp_servers.allow"),
    "mcp_servers.deny": _mcp("mcp_servers.deny"),
    "autonomy_tier": _autonomy_tier,
}


def test_every_strong_cell_has_an_effect_test() -> None:
    missing = [f"{e} x {t}" for e, t in CELLS if e not in EFFECTS]
    assert not missing, f"cells rated strong without an effect test: {missing}"


class _Secret(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"NETSECRET"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@dataclass
class Outcome:
    """One launch of a case: what reached the model, or why it could not be run."""

    case: Case
    env: Env
    result: Result | None = None
    strength: str | None = None
    error: str | None = None
    extra: list[Outcome] = field(default_factory=list)


def _make_env(base: Path, server: str) -> Env:
    root = base / "repo"
    for sub in (".git", "secrets", "src", "dist"):
        (root / sub).mkdir(parents=True)
    (root / "secrets" / "x.txt").write_text("TOPSECRET\n")
    (root / "notes.txt").write_text("PUBLIC\n")
    # outside the repository and outside /tmp (private inside the sandbox anyway)
    scratch = REAL_HOME / ".cache" / "charter" / "test-homes"
    scratch.mkdir(parents=True, exist_ok=True)
    outside = scratch / f"outside-{os.getpid()}-{base.name}.txt"
    outside.write_text("OUTSIDESECRET\n")
    return Env(root, outside, server)


def _perform(tool: str, element: str, case: Case, base: Path, server: str) -> Outcome:
    env = _make_env(base, server)
    out = Outcome(case, env)
    try:
        write_persona(
            env.repo,
            case.policy or None,
            tier=case.tier,
            servers=case.servers,
            server_extra=case.server_extra,
        )
        # the launch under test rates the cell strong too (same policy, tier, sandbox mode)
        shown = charter(
            "print-policy",
            tool,
            "p",
            "--json",
            cwd=env.repo,
            env={"HOME": str(base), "PATH": f"{realcli.clis_bin()}{os.pathsep}/usr/bin:/bin",
                 "CHARTER_LAUNCH_CACHE": "0", "LANG": "C.UTF-8"},
        )  # fmt: skip
        if shown.returncode != 0:
            out.error = f"print-policy failed: {shown.stderr[-2000:]}"
            return out
        cell = {e["element"]: e for e in json.loads(shown.stdout)["elements"]}.get(element)
        out.strength = cell["strength"] if cell else None
        call = None
        if case.actions is not None:
            actions = case.actions.replace("OUTSIDE", repr(str(env.outside)))
            call = _shell_call(tool, actions.replace("SERVER", repr(env.server)))
        out.result = realcli.launch(tool, env.repo, call=call, timeout=300)
        for i, extra in enumerate(case.extra_runs):
            (base / f"extra{i}").mkdir()
            out.extra.append(_perform(tool, "", extra, base / f"extra{i}", server))
    except Exception as exc:  # reported by the cell's test
        out.error = f"{type(exc).__name__}: {exc}"
    finally:
        env.outside.unlink(missing_ok=True)
    return out


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], Outcome]]:
    """Every strong cell's launch, run concurrently (the CLIs mostly wait on the model,
    the network and node's start-up): the whole matrix in a few minutes."""
    from concurrent.futures import ThreadPoolExecutor

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Secret)  # the same host as the model
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    original = realcli._env

    def auto(*args: Any) -> dict[str, str]:
        env = original(*args)
        env.pop("CHARTER_LAUNCH_SANDBOX", None)  # the matrix's default: --sandbox auto
        env["MCP_TIMEOUT"] = "90000"  # claude's MCP start-up wait, for a loaded machine
        env["MCP_CONNECTION_NONBLOCKING"] = "0"
        return env

    realcli._env = auto  # type: ignore[assignment]
    workers = int(os.environ.get("CHARTER_EFFECT_WORKERS", "8"))
    try:
        todo = [(e, t) for e, t in CELLS if installed(t) and e in EFFECTS]
        done: dict[tuple[str, str], Outcome] = {}

        def perform(cell: tuple[str, str]) -> Outcome:
            element, tool = cell
            base = tmp_path_factory.mktemp(f"{element}-{tool}")
            return _perform(tool, element, EFFECTS[element](tool), base, url)

        with ThreadPoolExecutor(max_workers=workers) as pool:
            # the MCP cells after the rest, one at a time: claude and codex start their
            # stdio servers in the background and offer the model what is up by then
            rest = [c for c in todo if not c[0].startswith("mcp_servers")]
            done.update(zip(rest, pool.map(perform, rest), strict=True))
        for cell in todo:
            if cell not in done:
                done[cell] = perform(cell)
        yield done
    finally:
        realcli._env = original
        server.shutdown()
        server.server_close()


def _check(out: Outcome, element: str) -> None:
    assert out.error is None, out.error
    assert out.result is not None
    if element:
        assert out.strength == "strong", f"the launch rates {element} {out.strength}"
    proc = out.result.proc
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert out.result.saw_overlay(), "the persona's instructions did not reach the model"
    out.case.check(out.result, out.env)
    for extra in out.extra:
        _check(extra, "")


@pytest.mark.parametrize(("element", "tool"), CELLS, ids=[f"{e}-{t}" for e, t in CELLS])
def test_strong_cell_effect(
    element: str, tool: str, outcomes: dict[tuple[str, str], Outcome]
) -> None:
    if not installed(tool):
        if os.environ.get("CI") == "true":
            pytest.fail(f"{tool} is not installed (make clis)")
        pytest.skip(f"{tool} is not installed (make clis)")
    _check(outcomes[(element, tool)], element)
