"""charter.sandbox: the kernel enforces what parsing cannot.

The policy layer decides each shell command from its text; an allowed interpreter
(``python3 -c``, ``node -e``, ``awk``, git hooks) can still read a denied file or open a
socket. So every shell charter runs under a policy also runs in an OS sandbox built from
the same effective policy:

- :func:`build_profile` -> :class:`SandboxProfile` (read-only view of ``/``, writable
  only where ``paths`` allow writes, denied and sensitive paths masked, network mode);
- :func:`bwrap_argv` turns a profile into a bubblewrap command line (new PID, IPC, UTS
  namespaces, ``--die-with-parent``, ``--new-session``, a clean environment passed
  through a descriptor, never argv: a :class:`Wrapped`; bubblewrap always sets
  no-new-privileges), and with a restricted network a seccomp filter refusing unix
  sockets (:mod:`charter.sandbox.seccomp`);
- :class:`NetworkProxy` is the only way out of a ``PROXY`` network namespace: every host
  is decided by :mod:`charter.policy`'s network rules;
- :class:`Sandbox` ties these together for one policy stack and workspace (one-shot
  shells and long-lived CLIs alike); :func:`sandbox_for` applies the fail-closed rule;
- :mod:`charter.sandbox.landlock` builds the small C helper that applies Landlock rules
  from the same profile inside bubblewrap (and bridges the proxy port);
- :func:`run_command` runs one command under the active stack's sandbox (the built-in
  ``bash`` tool uses it; custom ``kind = "execute"`` tools opt in by calling it);
- :mod:`charter.sandbox.planted` moves aside a file that runs later which a call
  created where none was (there was nothing to mount read-only);
- :func:`available` / :func:`diagnostics` say what this machine can do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from charter._lazy import lazy_exports

if TYPE_CHECKING:
    from .availability import Availability, available, diagnostics, install_hint, landlock_abi
    from .bwrap import BASE_ENV, PROXY_PORT, Wrapped, bwrap_argv, bwrap_path, sandbox_env
    from .execute import CREDENTIAL_VARS, SHELL_STARTUP_VARS, run_command
    from .profile import NetworkMode, SandboxProfile, build_profile, network_mode, writable_roots
    from .proxy import NetworkProxy, decide_host
    from .receipt import HostRefusal, SandboxReceipt, SandboxUnavailable, refused_paths_from
    from .runner import Sandbox, sandbox_for, shell_argv

# Names are imported on first use: a sandboxed ``charter launch`` needs the profile and
# bubblewrap modules at once, the policy engine and asyncio (the proxy, run_command) only
# later or never, and each costs tens of milliseconds to import.
_LAZY = {
    "Availability": "availability",
    "available": "availability",
    "diagnostics": "availability",
    "install_hint": "availability",
    "landlock_abi": "availability",
    "BASE_ENV": "bwrap",
    "PROXY_PORT": "bwrap",
    "bwrap_argv": "bwrap",
    "Wrapped": "bwrap",
    "bwrap_path": "bwrap",
    "sandbox_env": "bwrap",
    "SHELL_STARTUP_VARS": "execute",
    "CREDENTIAL_VARS": "execute",
    "run_command": "execute",
    "NetworkMode": "profile",
    "SandboxProfile": "profile",
    "build_profile": "profile",
    "network_mode": "profile",
    "writable_roots": "profile",
    "NetworkProxy": "proxy",
    "decide_host": "proxy",
    "HostRefusal": "receipt",
    "SandboxReceipt": "receipt",
    "SandboxUnavailable": "receipt",
    "refused_paths_from": "receipt",
    "Sandbox": "runner",
    "sandbox_for": "runner",
    "shell_argv": "runner",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), cache=False)


__all__ = [
    "BASE_ENV",
    "PROXY_PORT",
    "SHELL_STARTUP_VARS",
    "CREDENTIAL_VARS",
    "Availability",
    "HostRefusal",
    "NetworkMode",
    "NetworkProxy",
    "Sandbox",
    "SandboxProfile",
    "SandboxReceipt",
    "SandboxUnavailable",
    "available",
    "build_profile",
    "bwrap_argv",
    "Wrapped",
    "bwrap_path",
    "decide_host",
    "diagnostics",
    "install_hint",
    "landlock_abi",
    "network_mode",
    "refused_paths_from",
    "run_command",
    "sandbox_env",
    "sandbox_for",
    "shell_argv",
    "writable_roots",
]
