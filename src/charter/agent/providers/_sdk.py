"""Fit a request body to the installed SDK's method signature.

SDK releases add and drop typed keyword arguments (the Anthropic SDK's
``messages.create`` no longer takes ``temperature``); a body key the method does not
take would raise ``TypeError`` instead of reaching the API. Such keys move into
``extra_body``, which the SDK merges into the JSON body unchanged.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any


@functools.cache
def _parameters(method: Callable[..., Any]) -> frozenset[str]:
    params = inspect.signature(method).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return frozenset({"*"})
    return frozenset(p.name for p in params)


def fit_to_sdk(payload: dict[str, Any], method: Callable[..., Any]) -> dict[str, Any]:
    """``payload`` with the keys ``method`` does not accept moved into ``extra_body``."""
    accepted = _parameters(method)
    if "*" in accepted:
        return payload
    out: dict[str, Any] = {}
    extra = dict(payload.get("extra_body") or {})
    for key, value in payload.items():
        if key == "extra_body":
            continue
        if key in accepted:
            out[key] = value
        else:
            extra[key] = value
    if extra:
        out["extra_body"] = extra
    return out
