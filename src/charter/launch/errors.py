"""Launch errors (kept in a module that imports nothing, for the cached fast path)."""

from __future__ import annotations

from charter.errors import CharterError


class LaunchError(CharterError):
    """The launch cannot go ahead (message is for people); ``code`` is the exit status."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code
