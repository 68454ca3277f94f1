"""A sandbox for one policy and workspace: profile, proxy, wrapped argv, receipt."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from .availability import Availability, available, landlock_abi
from .bwrap import Wrapped, bwrap_argv, helper_visible, sandbox_env
from .landlock import Helper, build_helper, enforced
from .profile import NetworkMode, SandboxProfile, build_profile
from .receipt import HostRefusal, SandboxReceipt, SandboxUnavailable, refused_paths_from

if TYPE_CHECKING:  # the policy engine and the proxy (asyncio) are imported when needed
    from charter.policy import Frame

    from .compiled import Compiled
    from .pending import PendingProxy
    from .proxy import NetworkProxy


def shell_argv(command: str) -> list[str]:
    """The shell charter's policy parses, with no start-up files: bash, not ``/bin/sh``."""
    return ["bash", "--noprofile", "--norc", "-c", command]


class Sandbox:
    """The OS sandbox for ``frames`` (bottom first) in ``workspace``.

    Start it (or use ``with``) before :meth:`wrap`: a ``PROXY`` profile needs the proxy
    running for as long as the sandboxed process lives, which makes one ``Sandbox`` fit a
    long-lived CLI as well as a one-shot shell. The profile is built once, at construction;
    call :meth:`refresh` to rebuild it (for example before each shell call, so that new
    files matching a denied name are masked too).

    A long-lived CLI under a persona::

        box = sandbox_for(current_stack(), workspace, extra_writable=[cli_state_dir])
        if isinstance(box, SandboxUnavailable):
            raise SystemExit(box.message)          # fail closed
        with box:                                  # the proxy lives as long as the CLI
            argv = box.wrap(cli_argv, env=box.env({"ANTHROPIC_API_KEY": key}),
                            new_session=False)     # keep the terminal for a TUI
            subprocess.run(argv, pass_fds=argv.pass_fds)  # the environment's descriptor
            argv.close()
        receipt = box.receipt(exit_code)           # hosts the proxy refused meanwhile

    (``sandbox_for`` returns ``None`` when no sandbox applies: run ``cli_argv`` as is.)

    ``frames`` may be a function returning them, called when they are first needed (the
    proxy, :meth:`refresh`): with a ``compiled`` sandbox
    (:func:`charter.sandbox.compiled.compile_sandbox`, kept on disk) and
    ``start(background=True)``, wrapping a command imports neither the policy engine nor
    asyncio (``charter launch`` starts a CLI this way).
    """

    def __init__(
        self,
        frames: Sequence[Frame] | Callable[[], Sequence[Frame]],
        workspace: str,
        *,
        home: str | None = None,
        scan_roots: Sequence[str] = (),
        extra_writable: Sequence[str] = (),
        landlock: bool = True,
        compiled: Compiled | None = None,
    ) -> None:
        self._frames: tuple[Frame, ...] | None = None
        self._frames_factory: Callable[[], Sequence[Frame]] | None = None
        if callable(frames):
            self._frames_factory = frames
        else:
            self._frames = tuple(frames)
        self.use_landlock = landlock
        #: What Landlock enforced in the last :meth:`wrap` (``()``: bubblewrap alone).
        self.landlock: tuple[str, ...] = ()
        self._landlock_note: str | None = None
        self.workspace = workspace
        self._home = home
        self._scan_roots = tuple(scan_roots)
        self._extra_writable = tuple(extra_writable)
        self._compiled = compiled
        self.profile: SandboxProfile = compiled.profile if compiled else self._build()
        self.proxy: NetworkProxy | PendingProxy | None = None
        self._refused: list[HostRefusal] = []
        self._planted: list[tuple[str, str]] = []

    @property
    def frames(self) -> tuple[Frame, ...]:
        """The policy frames (built on first use when given as a function)."""
        if self._frames is None:
            assert self._frames_factory is not None
            self._frames = tuple(self._frames_factory())
        return self._frames

    def _build(self) -> SandboxProfile:
        from charter.policy import combined_policy
        from charter.policy.runs_later import judging_allow

        return build_profile(
            combined_policy(self.frames),
            self.workspace,
            home=self._home,
            scan_roots=self._scan_roots,
            extra_writable=self._extra_writable,
            later_allow=judging_allow(self.frames) or (),
        )

    def refresh(self) -> SandboxProfile:
        """Rebuild the profile from the same frames (the filesystem may have changed)."""
        self._compiled = None
        self.profile = self._build()
        return self.profile

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, *, background: bool = False) -> None:
        """Start the proxy when the profile routes the network through it.

        ``background``: its socket listens at once and the proxy itself (asyncio, the
        policy engine) starts in a thread while the sandboxed process starts; its first
        connections wait until then (:class:`charter.sandbox.pending.PendingProxy`).
        """
        if self.profile.network is not NetworkMode.PROXY or self.proxy is not None:
            return
        if background:
            from .pending import PendingProxy

            self.proxy = PendingProxy(lambda: self.frames)
        else:
            from .proxy import acquire_proxy

            self.proxy = acquire_proxy(self.frames)

    def stop(self) -> None:
        """Release the proxy (sandboxed processes lose the network); it is kept listening,
        idle, for the next sandbox under the same network rules (a background-started one
        is closed)."""
        if self.proxy is None:
            return
        from .pending import PendingProxy

        if isinstance(self.proxy, PendingProxy):
            self._refused.extend(self.proxy.close())
        else:
            from .proxy import release_proxy

            self._refused.extend(release_proxy(self.proxy))
        self.proxy = None

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The clean environment inside (see :func:`charter.sandbox.sandbox_env`)."""
        return sandbox_env(self.profile, extra)

    def wrap(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        new_session: bool = True,
        binds: Sequence[tuple[str, str]] = (),
        writable_binds: Sequence[str | tuple[str, str]] = (),
    ) -> Wrapped:
        """``argv`` wrapped in bubblewrap under this sandbox's profile: run it with
        ``pass_fds=wrapped.pass_fds`` (its environment travels through a descriptor,
        never argv), then ``wrapped.close()``.

        ``env`` is the full environment inside (default :meth:`env`); the caller runs the
        result with any environment, since ``--clearenv`` discards it.
        """
        if self.profile.network is NetworkMode.PROXY and self.proxy is None:
            raise RuntimeError("start() the sandbox first: its network goes through the proxy")
        if not self.profile.scan_complete:
            raise RuntimeError(incomplete_scan(self.profile).message)
        compiled = self._compiled
        helper: Helper | None
        if compiled is not None:  # built with the profile (and kept with it on disk)
            helper = Helper(compiled.helper, compiled.helper_reason) if self.use_landlock else None
        else:
            helper = build_helper() if self.use_landlock else None
        if helper is not None and helper.path and not helper_visible(helper.path, self.profile):
            helper = Helper(None, f"the helper {helper.path} is under a path the policy masks")
        abi: int | None = None
        if helper is not None and helper.path:
            abi = compiled.abi if compiled is not None else landlock_abi()
        self.landlock = enforced(self.profile, abi)
        self._landlock_note = None
        if helper is not None and helper.reason:
            self._landlock_note = f"Landlock not applied: {helper.reason}"
        elif helper is not None and abi is None:
            self._landlock_note = "Landlock not applied: not available in this kernel"
        return bwrap_argv(
            self.profile,
            argv,
            cwd=cwd,
            env=self.env() if env is None else env,
            proxy_socket=self.proxy.socket_path if self.proxy else None,
            new_session=new_session,
            binds=binds,
            helper=helper.path if helper is not None else None,
            landlock_abi=abi,
            writable_binds=writable_binds,
        )

    def take_planted(self) -> list[tuple[str, str]]:
        """After a run: move aside the files that run later it created where none was
        (:mod:`charter.sandbox.planted`); the next :meth:`receipt` reports them.

        Besides the profile's ``absent_later`` (the roots' own places), the profile is
        built again: a file that runs later it now holds read-only and did not before
        (a new ``sub/.vscode``, ``git init sub``'s ``sub/.git/config``) was created
        during the run."""
        from charter.policy.runs_later import written_runs_later

        from .planted import take_planted

        paths = list(self.profile.absent_later)
        if self._compiled is None:  # frames to build from (a launch keeps its compiled one)
            before = set(self.profile.readonly)
            after = self._build()
            paths += [
                p for p in after.readonly if p not in before and written_runs_later(p) is not None
            ]
        moved = take_planted(dict.fromkeys(paths))
        self._planted.extend(moved)
        return moved

    def receipt(self, exit_code: int | None, stderr: str = "") -> SandboxReceipt:
        """What the sandbox stopped during the run that just ended (consumes proxy refusals
        and what :meth:`take_planted` moved)."""
        from .planted import planted_notes

        hosts = (*self._refused, *(self.proxy.take_refusals() if self.proxy else ()))
        self._refused = []
        planted, self._planted = self._planted, []
        notes = self.profile.reasons + ((self._landlock_note,) if self._landlock_note else ())
        notes += planted_notes(planted)
        return SandboxReceipt(
            mechanism="bubblewrap",
            exit_code=exit_code,
            network=self.profile.network.value,
            refused_hosts=hosts,
            refused_paths=(
                *(path for path, _ in planted),
                *refused_paths_from(stderr, denied="reads" in self.landlock),
            ),
            notes=notes,
            landlock=self.landlock,
        )


def sandbox_for(
    frames: Sequence[Frame],
    workspace: str,
    *,
    info: Availability | None = None,
    home: str | None = None,
    scan_roots: Sequence[str] = (),
    extra_writable: Sequence[str] = (),
) -> Sandbox | SandboxUnavailable | None:
    """What a shell under ``frames`` must run in.

    ``None``: no sandbox (no policy is active, or it says ``sandbox = "off"``, or it
    restricts neither paths nor network and this machine cannot sandbox).
    :class:`SandboxUnavailable`: the policy restricts paths or network and no sandbox
    can be made, so the shell must not run (fail closed). Otherwise a :class:`Sandbox`.
    """
    if not frames:
        return None
    from charter.policy import combined_policy

    policy = combined_policy(frames)
    if policy.sandbox == "off":
        return None
    info = info or available()
    needed = tuple(
        name
        for name, restricted in (
            ("paths", policy.paths.restricted),
            ("network", policy.network.restricted),
        )
        if restricted
    )
    if not info.ok:
        return SandboxUnavailable(info.reasons, needed) if needed else None
    if policy.network.restricted:
        from .seccomp import unix_socket_filter

        if unix_socket_filter() is None:
            reason = "no seccomp filter for this architecture (unix sockets would stay open)"
            return SandboxUnavailable((reason,), ("network",))
    box = Sandbox(
        frames, workspace, home=home, scan_roots=scan_roots, extra_writable=extra_writable
    )
    if box.profile.network is NetworkMode.PROXY and not info.proxy_ok:
        return SandboxUnavailable(info.reasons, ("network",))
    if not box.profile.scan_complete:
        return incomplete_scan(box.profile)
    return box


def incomplete_scan(profile: SandboxProfile) -> SandboxUnavailable:
    """The refusal for a profile whose scan for denied names stopped at its limit: what
    lies beyond was never checked for ``.env``, ``*.pem`` or files that run later, so
    the sandbox cannot promise to hide or protect them (fail closed)."""
    from .profile import SCAN_LIMIT

    return SandboxUnavailable(
        (
            f"more than {SCAN_LIMIT} entries under {profile.workspace} and the writable "
            "roots: denied file names (.env*, *.pem, files that run later) beyond the "
            "limit could not be found and masked",
        ),
        ("paths",),
        hint="run the agent in a smaller workspace, or narrow the policy's writable "
        "paths (paths.allow) to the directories it works in",
    )
