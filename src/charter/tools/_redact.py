"""Credentials never leave the charter process: every result and error is scrubbed."""

from __future__ import annotations

import re
import threading
from typing import Any

MARK = "[redacted]"
# Authorization values a provider might echo back (Bearer / token / Token token=...).
_AUTH = re.compile(r"(?i)\b(bearer|token)(\s+token=|\s+)[A-Za-z0-9_\-.=:/+]{8,}")


class Redactor:
    """Replaces every known secret (and any ``Bearer …`` value) in strings, lists, dicts.

    Secrets minted at run time (an App's installation tokens, its JWTs) are added with
    :meth:`add` as they are made, so they are scrubbed too.
    """

    def __init__(self, secrets: tuple[str, ...] = ()) -> None:
        self._secrets: set[str] = set()
        self._lock = threading.Lock()
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str | None) -> None:
        if not secret:
            return
        with self._lock:
            self._secrets.add(secret)
            # a PEM key: each base64 line on its own too
            for line in secret.splitlines():
                line = line.strip()
                if len(line) >= 16 and not line.startswith("-----"):
                    self._secrets.add(line)

    def text(self, value: str) -> str:
        with self._lock:
            secrets = sorted(self._secrets, key=len, reverse=True)
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, MARK)
        return _AUTH.sub(lambda m: f"{m.group(1)} {MARK}", value)

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self(v) for v in value]
        return value
