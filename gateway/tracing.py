"""OpenTelemetry traces: a span per run with children for admission, store calls and backend calls.

Off unless configured by the standard variables: an OTLP/HTTP exporter is installed when
`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set and `OTEL_TRACES_EXPORTER` is not
`none` (`OTEL_SERVICE_NAME` and the rest are read by the SDK). Without it the API's no-op tracer costs next to
nothing, yet trace context still flows: an incoming W3C `traceparent` is honoured and carried to A2A agents.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
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
    log.info("exporting traces over OTLP/HTTP to %s", wanted)
    return True


@contextmanager
def incoming(headers: Mapping[str, str]) -> Iterator[None]:
    """Continue the caller's trace (W3C `traceparent`/`tracestate`) for the duration of a request."""
    token = context.attach(propagate.extract(headers))
    try:
        yield
    finally:
        context.detach(token)


def outgoing(headers: MutableMapping[str, str]) -> MutableMapping[str, str]:
    """Add the current trace context to an outgoing request's headers."""
    propagate.inject(headers)
    return headers


def span(name: str, **attributes: Any) -> Any:
    """A child span of the current one (a context manager)."""
    return tracer.start_as_current_span(name, attributes={k: v for k, v in attributes.items() if v is not None})
