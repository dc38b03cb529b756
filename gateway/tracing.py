"""OpenTelemetry traces: a span per run with children for admission, store calls and backend calls.

Off unless configured by the standard variables: an OTLP/HTTP exporter is installed when
`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set and `OTEL_TRACES_EXPORTER` is not
`none` (`OTEL_SERVICE_NAME` and the rest are read by the SDK). Without it the API's no-op tracer costs next to
nothing, yet trace context still flows: an incoming W3C `traceparent` is honoured and carried to A2A agents.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager, nullcontext
from typing import Any

from opentelemetry import context, propagate, trace

log = logging.getLogger("agui.tracing")
tracer = trace.get_tracer("agui-gateway")


def setup_tracing() -> bool:
    """Install the OTLP exporter when the environment asks for one; True when traces are exported."""
    wanted = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if not wanted or os.environ.get("OTEL_TRACES_EXPORTER", "otlp").lower() == "none":
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "agui-gateway")}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    provider_changed()
    log.info("exporting traces over OTLP/HTTP to %s", wanted)
    return True


_looked = [-1.0, False]  # when the provider was last looked at, and whether it records


def recording() -> bool:
    """Whether spans are recorded (an SDK provider is installed); without one, no span object is made at all, and
    the run's span is the caller's context itself, so that context still reaches the agents. Looked up at most once
    a second (the lookup reads the environment), so a provider installed later is seen within a second."""
    now = time.monotonic()
    if now - _looked[0] >= 1.0:
        _looked[0], _looked[1] = now, not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    return bool(_looked[1])


def provider_changed() -> None:
    """Look at the provider again at the next span (call after installing one, to record from the next run on)."""
    _looked[0] = -1.0


@contextmanager
def incoming(headers: Mapping[str, str]) -> Iterator[None]:
    """Continue the caller's trace (W3C `traceparent`/`tracestate`) for the duration of a request."""
    token = context.attach(propagate.extract(headers))
    try:
        yield
    finally:
        context.detach(token)


def start_run_span(name: str, attributes: dict[str, Any]) -> trace.Span:
    """The span a run lives in: recorded when traces are exported, else the current (caller's) context unchanged."""
    if recording():
        return tracer.start_span(name, attributes=attributes)
    current = trace.get_current_span()
    return current if isinstance(current, trace.NonRecordingSpan) else trace.NonRecordingSpan(current.get_span_context())


def outgoing(headers: MutableMapping[str, str]) -> MutableMapping[str, str]:
    """Add the current trace context to an outgoing request's headers."""
    propagate.inject(headers)
    return headers


def span(name: str, **attributes: Any) -> Any:
    """A child span of the current one (a context manager); nothing at all when spans are not recorded."""
    if not recording():
        return _NOTHING
    return tracer.start_as_current_span(name, attributes={k: v for k, v in attributes.items() if v is not None})


_NOTHING = nullcontext()
