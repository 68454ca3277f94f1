"""One error tree: every public exception class of charter derives from CharterError and
is drawn in charter.errors' module docstring."""

from __future__ import annotations

import importlib
import pkgutil
import warnings

import pytest

import charter
from charter.errors import CharterError

#: Control-flow signals, documented in charter.errors as outside the tree.
SIGNALS = {"RunParked", "RunStopped"}
#: Modules whose import has side effects or needs an optional extra at import time.
SKIP_PREFIXES = ("charter.__main__",)


def _public_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(charter.__path__, "charter."):
        if info.name.startswith(SKIP_PREFIXES) or "._" in info.name:
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra (a2a, otel) not installed
            continue
        for name, value in vars(module).items():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == info.name
                and not name.startswith("_")
            ):
                found[f"{info.name}.{name}"] = value
    return found


def test_every_public_error_is_a_charter_error() -> None:
    exceptions = _public_exceptions()
    assert len(exceptions) > 30
    outside = [
        qual
        for qual, cls in exceptions.items()
        if not issubclass(cls, CharterError) and cls.__name__ not in SIGNALS
    ]
    assert outside == [], "derive these from charter.errors.CharterError"


def test_the_tree_is_drawn() -> None:
    doc = importlib.import_module("charter.errors").__doc__ or ""
    missing = sorted(
        {cls.__name__ for cls in _public_exceptions().values()}
        - SIGNALS
        - {w.strip("(),") for w in doc.split()}
    )
    assert missing == [], "draw these in charter.errors' docstring"


def test_builtin_bases_kept() -> None:
    from charter.policy import PolicyError
    from charter.runtime import EventLogError, PersonaRuntimeError

    assert issubclass(PolicyError, ValueError)
    assert issubclass(EventLogError, RuntimeError)
    assert issubclass(PersonaRuntimeError, CharterError)
    assert charter.CharterError is CharterError


def test_old_runtime_error_name_warns() -> None:
    from charter.runtime import engine

    with pytest.warns(DeprecationWarning, match="PersonaRuntimeError"):
        old = engine.RuntimeError_
    assert old is engine.PersonaRuntimeError
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert engine.PersonaRuntimeError is old
