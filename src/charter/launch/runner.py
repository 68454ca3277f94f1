"""Executing a plan: temp files, the run mode, signals, exit status.

The tool runs as a child that inherits stdin, stdout and stderr; charter waits so that it
can restore the swapped file and remove its temp files on every exit path, forwards
SIGTERM / SIGHUP / SIGQUIT (and SIGINT when no terminal delivers it to the child itself),
and exits with the child's status, or dies of the child's signal. It never re-runs the
tool.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from types import FrameType
from typing import Any

from .errors import LaunchError
from .job import Job
from .swap import SwapBusy, placeholder, swapped

_FORWARD = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGINT)
MOUNT_SCRIPT = 'src=$1; dst=$2; shift 2; mount --bind "$src" "$dst" || exit 125; exec "$@"'
NESTED_SCRIPT = (
    'src=$1; dst=$2; uid=$3; gid=$4; shift 4; mount --bind "$src" "$dst" || exit 125; '
    'exec unshare --user --map-user="$uid" --map-group="$gid" -- "$@"'
)


def unshare_works() -> bool:
    """Can this process make a private mount namespace (directly, or via a user namespace)?"""
    exe = shutil.which("unshare")
    if exe is None:
        return False
    cmd = [exe, "--mount", "--propagation", "private", "true"]
    if os.geteuid() != 0:
        cmd = [exe, "--user", "--map-root-user", "--mount", "--propagation", "private", "true"]
    try:
        return subprocess.run(cmd, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def namespace_argv(source: str, target: str, argv: list[str]) -> list[str]:
    """``argv`` run in a private mount namespace where ``source`` covers ``target``.

    As root a mount namespace is enough; otherwise a root-mapped user namespace makes the
    bind mount possible and a nested one maps back to the real uid for the tool.
    """
    exe = shutil.which("unshare") or "unshare"
    if os.geteuid() == 0:
        return [
            exe,
            "--mount",
            "--propagation",
            "private",
            "--",
            "/bin/sh",
            "-c",
            MOUNT_SCRIPT,
            "charter-ns",
            source,
            target,
            *argv,
        ]
    return [
        exe,
        "--user",
        "--map-root-user",
        "--mount",
        "--propagation",
        "private",
        "--",
        "/bin/sh",
        "-c",
        NESTED_SCRIPT,
        "charter-ns",
        source,
        target,
        str(os.getuid()),
        str(os.getgid()),
        *argv,
    ]


def write_files(job: Job) -> str:
    """Create the job's temp dir (mode 0700) with its files; return the overlay's path."""
    os.makedirs(os.path.dirname(job.tmpdir), mode=0o700, exist_ok=True)
    os.mkdir(job.tmpdir, 0o700)
    with open(os.path.join(job.tmpdir, "pid"), "w", encoding="utf-8") as fh:
        fh.write(str(os.getpid()))
    for name, text in job.files.items():
        path = os.path.join(job.tmpdir, name)
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    fresh: frozenset[str] = frozenset()
    if job.sandbox is not None:  # the user's state is read-only inside: see redirect_state
        from .sandboxing import STATE_SUBDIRS

        os.mkdir(os.path.join(job.tmpdir, "tmp"), 0o700)  # the CLI's TMPDIR

        fresh = STATE_SUBDIRS.get(job.tool, frozenset())
    for name, source in sorted(job.mirrors.items()):
        folder = os.path.join(job.tmpdir, name)
        if os.path.isfile(source) or (job.sandbox is not None and not os.path.isdir(source)):
            if os.path.isfile(source) and not os.path.lexists(folder):
                os.makedirs(os.path.dirname(folder), mode=0o700, exist_ok=True)
                shutil.copyfile(source, folder)
            continue
        os.makedirs(folder, mode=0o700, exist_ok=True)
        try:
            entries = os.listdir(source)
        except OSError:
            entries = []
        for entry in entries:
            link = os.path.join(folder, entry)
            path = os.path.join(source, entry)
            if os.path.lexists(link) or entry in fresh:
                continue
            if job.sandbox is not None and os.path.isfile(path) and not os.path.islink(path):
                shutil.copyfile(path, link)  # the CLI may rewrite its copy, not the user's
            else:
                os.symlink(path, link)
    overlay_dir = os.path.join(job.tmpdir, "overlay")
    os.mkdir(overlay_dir, 0o755)
    path = os.path.join(overlay_dir, job.overlay_name)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(job.overlay_text)
    os.chmod(path, 0o644)
    return path


def clean_stale_tmpdirs(base: str) -> list[str]:
    """Remove launch temp dirs whose launcher is gone (after a SIGKILL)."""
    removed: list[str] = []
    try:
        names = os.listdir(base)
    except OSError:
        return removed
    for name in names:
        path = os.path.join(base, name)
        if not name.startswith("charter-") or not os.path.isdir(path):
            continue
        try:
            with open(os.path.join(path, "pid"), encoding="utf-8") as fh:
                pid = int(fh.read().strip())
        except (OSError, ValueError):
            continue
        if not _alive(pid):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def _forwarding(child: subprocess.Popen[bytes]) -> Iterator[None]:
    tty = sys.stdin.isatty()

    def handler(signum: int, _frame: FrameType | None) -> None:
        if signum == signal.SIGINT and tty:
            return  # the terminal already sent it to the child's process group
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    previous = {sig: signal.signal(sig, handler) for sig in _FORWARD}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def check_binary(job: Job) -> str:
    """The absolute path of the tool's program, or a :class:`LaunchError` (127 / 126).

    Checked before any run mode starts, so a missing or non-executable CLI gives the same
    error whether the tool would run directly, under ``unshare`` or in swap mode (and no
    file is swapped for a tool that cannot start).
    """
    name = job.argv[0]
    path_var = job.full_env().get("PATH", os.defpath)
    if os.sep in name:
        candidates = [name if os.path.isabs(name) else os.path.join(job.workspace, name)]
    else:
        candidates = [os.path.join(d or ".", name) for d in path_var.split(os.pathsep)]
    found = [c for c in candidates if os.path.isfile(c)]
    for candidate in found:
        if os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    if found:
        raise LaunchError(
            f"{job.tool}: {found[0]} is not executable (reinstall {job.npm_package}; "
            "`charter doctor` checks the CLIs)",
            126,
        )
    raise LaunchError(
        f"{job.tool}: command not found (install {job.npm_package}; "
        "`charter doctor` checks the CLIs)",
        127,
    )


def _run_child(argv: list[str], job: Job) -> int:
    # a sandboxed argv carries its environment in a descriptor (never on the command line)
    fds = getattr(argv, "pass_fds", ())
    try:
        child = subprocess.Popen(argv, env=job.full_env(), cwd=job.workspace, pass_fds=fds)
    except (FileNotFoundError, PermissionError):  # vanished or changed since check_binary
        raise LaunchError(
            f"{job.tool}: could not start {job.argv[0]} (install {job.npm_package}; "
            "`charter doctor` checks the CLIs)",
            127,
        ) from None
    with _forwarding(child):
        while True:
            try:
                return child.wait()
            except InterruptedError:  # pragma: no cover - PEP 475 retries for us
                continue


def _run_sandboxed(job: Job, overlay_path: str) -> int:
    """Run the CLI inside ``charter.sandbox`` (bubblewrap; the proxy for its network).

    The overlay is bound read-only over the placeholder at ``job.target`` inside the
    sandbox, as unshare mode does; the CLI's binary directory stays visible even when the
    sandbox gives it a private ``/tmp``. No sandbox can be made: refuse (fail closed).

    Kept fast (the sandbox is a once-per-launch cost): the compiled sandbox comes from
    disk while nothing it was built from changed (:mod:`charter.sandbox.compiled`), and
    the proxy's socket listens at once while the proxy itself (asyncio, the policy
    engine) starts in a thread as the CLI starts.
    """
    from charter.sandbox.availability import available
    from charter.sandbox.compiled import compile_sandbox
    from charter.sandbox.profile import NetworkMode
    from charter.sandbox.runner import Sandbox

    assert job.sandbox is not None
    spec = job.sandbox
    policy = spec["policy"]
    env = job.full_env()
    home = env.get("HOME") or os.path.expanduser("~")
    if policy.get("sandbox") == "off":  # as sandbox_for: the policy opted out itself
        return _run_child(job.argv, job)
    # as sandbox_for: what the policy restricts (an entry cached before "needed" was
    # recorded: both, so a missing sandbox refuses)
    needed = tuple(spec.get("needed", ("paths", "network")))
    info = available()
    compiled = None
    reasons = info.reasons
    if info.ok:
        compiled = compile_sandbox(
            policy,
            job.workspace,
            home=home,
            extra_writable=spec["extra_writable"],
            volatile=job.tmpdir,
        )
        if compiled.profile.network is NetworkMode.PROXY and not info.proxy_ok:
            compiled, needed = None, ("network",)
        elif not compiled.profile.scan_complete:  # fail closed: unscanned names unmasked
            from charter.sandbox.runner import incomplete_scan

            raise LaunchError(f"{job.tool}: {incomplete_scan(compiled.profile).message}", 1)
    if compiled is None:
        if not needed:  # restricts nothing the sandbox enforces, and none can be made
            return _run_child(job.argv, job)
        raise LaunchError(
            f"{job.tool}: the persona's policy needs an OS sandbox here "
            f"({'; '.join(spec['reasons']) or 'paths or network'}), and none can be "
            f"made: {'; '.join(reasons)} (--sandbox=never launches without it, refused under "
            "--strict-policy)",
            1,
        )

    if compiled.profile.readable != ("/",) and not (compiled.helper and compiled.abi):
        # only Landlock limits reads (a mount cannot hide all but a few trees): without
        # it the read allow list would hold nothing; refuse rather than pretend
        raise LaunchError(
            f"{job.tool}: the persona's policy limits reads, which needs Landlock here, and "
            f"it is not available ({compiled.helper_reason or 'not in this kernel'}); "
            "--sandbox=never launches without it, refused under --strict-policy",
            1,
        )

    def frames() -> list[Any]:
        from charter.policy import Frame, Policy

        return [Frame(Policy.from_dict(policy), label="launch:persona")]

    sandbox = Sandbox(
        frames,
        job.workspace,
        home=home,
        extra_writable=spec["extra_writable"],
        compiled=compiled,
    )
    binary = os.path.realpath(job.argv[0])
    binds = [(overlay_path, job.target)]
    # The launch's policy files (Claude's settings, Gemini's admin policy, the MCP
    # configs) stay read-only inside: the temp dir is writable, and a CLI that re-reads
    # its settings must not get ones its model rewrote. A mirrored home (gemini's) is
    # the CLI's own state: writable.
    homes = {name.split("/", 1)[0] for name in job.mirrors}
    for name in job.files:
        if name.split("/", 1)[0] not in homes:
            path = os.path.join(job.tmpdir, name)
            binds.append((path, path))
    for directory in dict.fromkeys(
        (os.path.dirname(job.argv[0]), os.path.dirname(binary), *_install_roots(binary))
    ):
        binds.append((directory, directory))
    # the user's state and config dirs the CLI's own state mirrors: readable, not writable
    binds.extend((p, p) for p in spec.get("state_read", ()) if os.path.exists(p))
    throwaway: list[tuple[str, str]] = []
    with contextlib.ExitStack() as held:
        binds.extend(_hold_runs_later(job, spec, compiled.profile.writable, held, throwaway))
        return _run_in(job, sandbox, binds, throwaway)


def _install_roots(binary: str) -> list[str]:
    """What the launched program needs to execute besides its own directory: the
    ``node_modules`` its npm package sits in (codex's ``bin/codex.js`` runs the binary of
    its platform package ``@openai/codex-linux-x64``, a sibling or nested there), wherever
    it is installed (under HOME, under a private /tmp, behind a read allow list)."""
    parts = binary.split(os.sep)
    for i in range(len(parts) - 1, 0, -1):
        if parts[i] == "node_modules":
            return [os.sep.join(parts[: i + 1])]
    return []


def _hold_runs_later(
    job: Job,
    spec: dict[str, Any],
    writable: tuple[str, ...],
    stack: contextlib.ExitStack,
    throwaway: list[tuple[str, str]],
) -> list[tuple[str, str]]:
    """Read-only binds for the files that run later under the sandbox's writable roots
    (:mod:`charter.launch.planted`), with placeholders made for the missing ones (a
    missing directory gets a throwaway stand-in, added to ``throwaway``)."""
    from .planted import held_paths

    env = job.full_env()
    home = os.path.realpath(env.get("HOME") or os.path.expanduser("~"))
    roots = (job.workspace, os.path.dirname(job.target), home)
    writable = tuple(w for w in writable if w != job.tmpdir)
    held = held_paths(roots, writable, spec.get("runs_later_allowed", ()))
    binds = [(p, p) for p in held.existing]
    for path in held.missing:
        directory = not path.endswith((".json", ".jsonc"))
        try:
            stack.enter_context(placeholder(path, env=job.base_env, directory=directory))
        except (OSError, SwapBusy):
            # cannot hold it: fail closed (the CLI would be free to plant it)
            raise LaunchError(
                f"{job.tool}: cannot hold {path} read-only for the launch (a file that runs later)",
                2,
            ) from None
        if directory:
            # a throwaway directory in the temp dir stands in for it (writable: a CLI that
            # finds the directory writes its own files there, opencode does), gone with
            # the launch; the host keeps the empty placeholder, removed at the end
            stand_in = os.path.join(job.tmpdir, "held", str(len(throwaway)))
            os.makedirs(stand_in, mode=0o755)
            throwaway.append((stand_in, path))
        else:
            source = os.path.join(job.tmpdir, "empty.json")
            if not os.path.exists(source):
                with open(source, "w", encoding="utf-8") as fh:
                    fh.write("{}\n")
            binds.append((source, path))
    return binds


def _run_in(
    job: Job, sandbox: Any, binds: list[tuple[str, str]], throwaway: list[tuple[str, str]]
) -> int:
    env = job.full_env()
    sandbox.start(background=True)
    try:
        inside = {**env, **{k: v for k, v in sandbox.env().items() if "proxy" in k.lower()}}
        argv = sandbox.wrap(
            job.argv,
            cwd=job.workspace,
            env=inside,
            new_session=False,
            binds=binds,
            # as root the temp dir is under /run, private inside
            writable_binds=[job.tmpdir, *throwaway],
        )
        try:
            status = _run_child(argv, job)
        finally:
            argv.close()
    finally:
        sandbox.stop()
    for refusal in sandbox.receipt(status).refused_hosts:
        print(f"charter: sandbox refused {refusal.host}: {refusal.reason}", file=sys.stderr)
    return status


def execute(job: Job) -> int:
    """Run the job; return the exit status to exit with (negative: die of that signal)."""
    check_binary(job)
    try:
        overlay_path = write_files(job)
        # A sandboxed CLI gets its overlay from bubblewrap: no unshare probe (a subprocess)
        if job.sandbox is None and job.run_mode == "unshare" and not unshare_works():
            print(
                "charter: unshare is not available here (no user/mount namespaces); "
                "falling back to swap mode",
                file=sys.stderr,
            )
            job.run_mode = "swap"
            job.env["AGENT_PERSONA_RUN_MODE"] = "swap"
        try:
            if job.sandbox is not None:
                with placeholder(job.target, env=job.base_env):
                    return _run_sandboxed(job, overlay_path)
            if job.run_mode == "unshare":
                with placeholder(job.target, env=job.base_env):
                    argv = namespace_argv(overlay_path, job.target, job.argv)
                    return _run_child(argv, job)
            with swapped(job.target, job.overlay_text, env=job.base_env):
                return _run_child(job.argv, job)
        except SwapBusy as exc:
            raise LaunchError(str(exc), 75) from None
    finally:
        shutil.rmtree(job.tmpdir, ignore_errors=True)


def exit_like(status: int) -> int:
    """Exit status for ``status``; a child killed by a signal kills us by the same signal."""
    if status < 0:
        sig = -status
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        return 128 + sig
    return status
