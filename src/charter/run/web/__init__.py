"""The HTTP layer of ``charter serve`` and ``charter console``: one Starlette app on uvicorn.

Imported only by those commands (Starlette, uvicorn, Jinja2 and prometheus-client load
with it, never at CLI start-up).
"""

from .access import TOKENS_ENV, Access, AccessError, is_loopback
from .app import bind_socket, build_app, http_server
from .data import ConsoleData
from .metrics import Metrics

__all__ = [
    "TOKENS_ENV",
    "Access",
    "AccessError",
    "ConsoleData",
    "Metrics",
    "bind_socket",
    "build_app",
    "http_server",
    "is_loopback",
]
