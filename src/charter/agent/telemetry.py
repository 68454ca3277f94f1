"""OpenTelemetry spans for the agent loop and persona runs (the optional ``charter[otel]``).

Spans follow the GenAI semantic conventions: ``chat {model}`` per model call
(``gen_ai.operation.name=chat``, request/response model, token usage), ``execute_tool
{tool}`` per tool call (``gen_ai.tool.*`` plus the policy decision, dimension, frame and
rule as ``charter.policy.*``), and ``invoke_agent {persona}`` per persona run.

Without the extra nothing is imported: :func:`span` yields ``None`` after one
``find_spec`` look-up; with it but no tracer provider installed, likewise (no cost).
With a provider, spans go to it; when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``..._TRACES_ENDPOINT``) is set and no provider was installed, an SDK provider exporting
over OTLP/HTTP is installed on first use.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

_TRACER: Any = None
_TRACE: Any = None  # the opentelemetry.trace module, once imported
_AVAILABLE: bool | None = None
_INSTALLED = False  # a real (non-proxy) tracer provider was seen
SCOPE = "charter"
OTLP_ENV = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def available() -> bool:
    """Whether the ``otel`` extra is installed (checked once, importing nothing)."""
    global _AVAILABLE
    if _AVAILABLE is None:
        try:
            _AVAILABLE = importlib.util.find_spec("opentelemetry.trace") is not None
        except ImportError:  # no ``opentelemetry`` package at all
            _AVAILABLE = False
    return _AVAILABLE


def _configure_otlp() -> None:
    from opentelemetry import trace

    if not any(os.environ.get(name) for name in OTLP_ENV):
        return
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return  # the host configured its own provider
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "charter"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)


def tracer() -> Any:
    """The ``charter`` tracer, or ``None`` without the extra."""
    global _TRACER, _TRACE, _INSTALLED
    if _INSTALLED:  # a global provider is set once and for all (OpenTelemetry's rule)
        return _TRACER
    if _TRACE is not None and _TRACER is not None and _no_provider(_TRACE):
        return None  # the per-call case: nothing installed yet (see _no_provider)
    if not available():
        return None
    if _TRACE is None:
        from opentelemetry import trace

        _TRACE = trace
    if _TRACER is None:
        _configure_otlp()
        _TRACER = _TRACE.get_tracer(SCOPE)
    if _no_provider(_TRACE):
        return None  # no provider installed (yet): spans would be dropped, skip their cost
    if isinstance(_TRACE.get_tracer_provider(), _TRACE.ProxyTracerProvider):
        return None
    _INSTALLED = True
    return _TRACER


#: The variable naming a provider ``get_tracer_provider`` loads on its first call.
_PROVIDER_ENV = "OTEL_PYTHON_TRACER_PROVIDER"
_ENVIRON = os.environ
_ENV_DATA: Any = getattr(_ENVIRON, "_data", None)
_ENV_KEY: Any = (
    _ENVIRON.encodekey(_PROVIDER_ENV) if hasattr(_ENVIRON, "encodekey") else _PROVIDER_ENV
)


def _no_provider(trace: Any) -> bool:
    """Whether ``trace.get_tracer_provider()`` would answer its proxy, without calling it.

    This runs on every model and tool call until a provider is installed, and
    ``get_tracer_provider`` asks ``os.environ`` each time (about 0.6 us: a missing key is a
    ``KeyError`` inside the mapping). Its own two tests, made cheaply: the global provider
    ``set_tracer_provider`` sets is still unset, and the variable naming one to load is
    absent from the environment's own dict (under the key ``os.environ`` would look up).
    Anything unexpected (another OpenTelemetry layout, a replaced ``os.environ``) answers
    ``False``: the caller then asks ``get_tracer_provider`` itself.
    """
    if getattr(trace, "_TRACER_PROVIDER", _UNSET) is not None:
        return False  # installed, or a layout this does not know
    if os.environ is not _ENVIRON or _ENV_DATA is None:
        return False
    return _ENV_KEY not in _ENV_DATA


_UNSET = object()


def reset() -> None:
    """Forget the cached tracer (tests that install their own provider)."""
    global _TRACER, _AVAILABLE, _INSTALLED
    _TRACER, _AVAILABLE, _INSTALLED = None, None, False


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        out[key] = value if isinstance(value, (str, bool, int, float)) else str(value)
    return out


@contextmanager
def span(name: str, attributes: Mapping[str, Any]) -> Iterator[Any]:
    """A span named ``name`` (``None`` without the extra); exceptions mark it as an error."""
    active = tracer()
    if active is None:
        yield None
        return
    with active.start_as_current_span(name, attributes=_clean(attributes)) as current:
        yield current


def annotate(current: Any, attributes: Mapping[str, Any]) -> None:
    """Set attributes on ``current`` (a no-op for ``None``)."""
    if current is not None:
        current.set_attributes(_clean(attributes))


def error(current: Any, kind: str) -> None:
    if current is not None:
        from opentelemetry.trace import Status, StatusCode

        current.set_attribute("error.type", kind)
        current.set_status(Status(StatusCode.ERROR))


def tool_attributes(outcome: Any) -> dict[str, Any]:
    """``execute_tool`` attributes of a :class:`~charter.agent.dispatch.ToolOutcome`."""
    decision = outcome.decision or {}
    frame = decision.get("frame")
    return {
        "charter.tool.status": outcome.status,
        "charter.policy.decision": decision.get("decision"),
        "charter.policy.dimension": decision.get("dimension"),
        "charter.policy.frame": frame.get("label") if isinstance(frame, dict) else frame,
        "charter.policy.rule": decision.get("rule"),
        "charter.policy.reason": decision.get("reason"),
    }


def inject() -> dict[str, str] | None:
    """The current trace context as W3C headers (``traceparent``), to carry to another
    process (a worker snapshot); ``None`` when no span is being recorded."""
    if tracer() is None:
        return None
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier or None


@contextmanager
def attached(carrier: Mapping[str, str] | None) -> Iterator[None]:
    """Make ``carrier``'s trace context current: spans started inside are its children
    (a resumed worker continues the trace of the run that parked it)."""
    if not carrier or tracer() is None:
        yield
        return
    from opentelemetry import context, propagate

    token = context.attach(propagate.extract(dict(carrier)))
    try:
        yield
    finally:
        context.detach(token)


__all__ = [
    "annotate",
    "attached",
    "available",
    "error",
    "inject",
    "reset",
    "span",
    "tool_attributes",
    "tracer",
]
