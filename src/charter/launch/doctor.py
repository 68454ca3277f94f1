"""``charter doctor``: are the CLIs, namespaces, bubblewrap and persona folders usable here?"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

from .clis import CLIS


def _version(binary: str) -> str | None:
    try:
        proc = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    text = (proc.stdout or proc.stderr).strip().splitlines()
    return text[0] if proc.returncode == 0 and text else None


def tracked_checks(manifest: Any, cwd: str | None = None) -> list[dict[str, Any]]:
    """Per persona: denied paths the repository here tracks (readable through git)."""
    from charter.sandbox.tracked import tracked_denied, tracked_note

    out: list[dict[str, Any]] = []
    where = cwd or os.getcwd()
    for persona in manifest.personas:
        denied = tracked_denied(persona.effective_policy, where)
        if denied:
            out.append(
                {
                    "check": f"tracked denied paths: {persona.name}",
                    "status": "warn",
                    "detail": tracked_note(denied),
                }
            )
    return out


def checks(cwd: str | None = None) -> list[dict[str, Any]]:
    from charter.manifest import load_manifest
    from charter.sandbox import diagnostics as sandbox_diagnostics

    from .runner import unshare_works

    out: list[dict[str, Any]] = []
    for name, spec in CLIS.items():
        path = shutil.which(spec.binary)
        if path is None:
            out.append(
                {
                    "check": f"cli:{name}",
                    "status": "warn",
                    "detail": f"not on PATH (npm install {spec.npm_package}@{spec.version})",
                }
            )
            continue
        version = _version(path)
        status = "ok" if version and spec.version in version else "warn"
        detail = f"{path}: {version or 'no --version output'}"
        if status == "warn" and version:
            detail += f" (translation verified with {spec.version})"
        out.append({"check": f"cli:{name}", "status": status, "detail": detail})
    ns = unshare_works()
    out.append(
        {
            "check": "unshare",
            "status": "ok" if ns else "warn",
            "detail": "private mount namespaces work: run mode unshare"
            if ns
            else "no mount namespace: launches fall back to swap mode",
        }
    )
    # bubblewrap, the network proxy's bridge and Landlock, as charter.sandbox probes them
    out.extend(sandbox_diagnostics())
    manifest = load_manifest(cwd=cwd)
    roots = ", ".join(f"{p} ({o})" for p, o in manifest.persona_roots) or "none"
    out.append(
        {
            "check": "persona folders",
            "status": "ok" if manifest.persona_roots else "warn",
            "detail": f"{len(manifest.personas)} persona(s); roots: {roots}",
        }
    )
    if manifest.errors:
        out.append(
            {
                "check": "personas valid",
                "status": "fail",
                "detail": "; ".join(str(e) for e in manifest.errors[:5]),
            }
        )
    else:
        out.append({"check": "personas valid", "status": "ok", "detail": "no problems"})
    out.extend(tracked_checks(manifest, cwd))
    shared = os.environ.get("CHARTER_RUN_MODE")
    if shared:
        out.append({"check": "CHARTER_RUN_MODE", "status": "ok", "detail": shared})
    return out
