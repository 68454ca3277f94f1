"""What the runner needs to start a tool: plain data, no policy objects.

A :class:`Job` comes from a freshly built plan or from the launch cache; either way the
runner does the same thing with it.
"""

from __future__ import annotations

import os
from typing import Any

#: Stands for the per-launch temp dir in cached jobs and renderings.
TMP_TOKEN = "@@CHARTER_TMPDIR@@"


class Job:
    """A plain class (not a dataclass): this module is on the fast path of every launch."""

    __slots__ = (
        "argv",
        "base_env",
        "binary",
        "env",
        "files",
        "mirrors",
        "npm_package",
        "overlay_name",
        "overlay_text",
        "run_mode",
        "sandbox",
        "target",
        "tmpdir",
        "tool",
        "workspace",
    )

    def __init__(
        self,
        *,
        tool: str,
        binary: str,
        npm_package: str,
        argv: list[str],
        env: dict[str, str],
        base_env: dict[str, str],
        workspace: str,
        target: str,
        overlay_name: str,
        overlay_text: str,
        files: dict[str, str] | None = None,
        tmpdir: str = "",
        run_mode: str = "swap",
        sandbox: dict[str, Any] | None = None,
        mirrors: dict[str, str] | None = None,
    ) -> None:
        self.tool = tool
        self.binary = binary
        self.npm_package = npm_package
        self.argv = argv
        self.env = env  # what charter sets, on top of base_env
        self.base_env = base_env
        self.workspace = workspace
        self.target = target  # absolute path of the instructions file the CLI reads
        self.overlay_name = overlay_name
        self.overlay_text = overlay_text
        self.files = files if files is not None else {}  # name in tmpdir -> content
        self.tmpdir = tmpdir
        self.run_mode = run_mode
        self.sandbox = sandbox  # charter.launch.sandboxing.spec, or None: run unwrapped
        self.mirrors = mirrors if mirrors is not None else {}  # tmp dir -> dir to mirror

    def full_env(self) -> dict[str, str]:
        return {**self.base_env, **self.env}

    def to_cache(self) -> dict[str, Any]:
        """JSON form with the temp dir replaced by a token (base_env is not stored)."""

        def sub(text: str) -> str:
            return text.replace(self.tmpdir, TMP_TOKEN) if self.tmpdir else text

        return {
            "tool": self.tool,
            "binary": self.binary,
            "npm_package": self.npm_package,
            "argv": [sub(a) for a in self.argv],
            "env": {k: sub(v) for k, v in self.env.items()},
            "workspace": self.workspace,
            "target": self.target,
            "overlay_name": self.overlay_name,
            "overlay_text": self.overlay_text,
            "files": {k: sub(v) for k, v in self.files.items()},
            "run_mode": self.run_mode,
            "sandbox": _sub_json(self.sandbox, sub),
            "mirrors": dict(self.mirrors),
        }

    @classmethod
    def from_cache(cls, data: dict[str, Any], tmpdir: str, base_env: dict[str, str]) -> Job:
        def sub(text: str) -> str:
            return text.replace(TMP_TOKEN, tmpdir)

        return cls(
            tool=data["tool"],
            binary=data["binary"],
            npm_package=data["npm_package"],
            argv=[sub(a) for a in data["argv"]],
            env={k: sub(v) for k, v in data["env"].items()},
            base_env=base_env,
            workspace=data["workspace"],
            target=data["target"],
            overlay_name=data["overlay_name"],
            overlay_text=data["overlay_text"],
            files={k: sub(v) for k, v in data["files"].items()},
            tmpdir=tmpdir,
            run_mode=data["run_mode"],
            sandbox=_sub_json(data.get("sandbox"), sub),
            mirrors=dict(data.get("mirrors") or {}),
        )


def _sub_json(value: Any, sub: Any) -> Any:
    """``value`` with the temp dir token swapped in every string (the sandbox spec)."""
    if isinstance(value, str):
        return sub(value)
    if isinstance(value, list):
        return [_sub_json(v, sub) for v in value]
    if isinstance(value, dict):
        return {k: _sub_json(v, sub) for k, v in value.items()}
    return value


def new_tmpdir(tool: str, euid: int) -> str:
    """A fresh (not yet created) temp dir path for one launch.

    As root, a root-owned directory outside /tmp (gemini only accepts a system settings
    file from such a place); otherwise ``$TMPDIR`` or /tmp.
    """
    if euid == 0 and os.path.isdir("/run") and os.access("/run", os.W_OK):
        base = "/run/charter"
    else:
        base = os.environ.get("TMPDIR") or "/tmp"
    return os.path.join(base, f"charter-{tool}-{os.urandom(4).hex()}")


def temp_base(euid: int) -> str:
    return os.path.dirname(new_tmpdir("x", euid))


def which(name: str, path: str | None = None) -> str | None:
    """``shutil.which`` for POSIX, without importing shutil (which imports bz2 and lzma:
    milliseconds of every cold launch): the first executable file named ``name`` on
    ``path`` (default ``$PATH``); a name with a slash is checked as it is."""
    if os.sep in name:
        return name if _executable(name) else None
    search = os.environ.get("PATH", os.defpath) if path is None else path
    if not search:
        return None
    for directory in search.split(os.pathsep):
        candidate = os.path.join(directory or os.curdir, name)
        if _executable(candidate):
            return candidate
    return None


def _executable(path: str) -> bool:
    return os.access(path, os.X_OK) and not os.path.isdir(path) and os.path.exists(path)
