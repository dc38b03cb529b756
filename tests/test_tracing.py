"""Traces: a span per run with children for admission, store calls and backend calls; an incoming W3C traceparent is
continued, and A2A agents receive it."""

from __future__ import annotations

import uuid

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gateway.settings import Settings
from gateway.tracing import provider_changed
from server.app import create_app
from tests.support import InProcessGateway, post_sse, run_body

EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def provider():
    installed = TracerProvider()
    installed.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(installed)  # once per process; the gateway's tracer is a proxy that follows it
    provider_changed()
    yield installed


def test_a_run_is_one_span_whose_children_are_admission_store_and_settling(tmp_path):
    trace_id, parent = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    settings = Settings(state_dir=str(tmp_path), allowed_cwd=("/tmp",), store="memory")
    EXPORTER.clear()
    with InProcessGateway(create_app(settings)) as server, httpx.Client() as client:
        result = post_sse(client, server.url + "/", run_body("traced"), headers={"traceparent": f"00-{trace_id}-{parent}-01"})
        assert result.terminal["type"] == "RUN_FINISHED"
    spans = {span.name: span for span in EXPORTER.get_finished_spans()}
    run = spans["agui.run"]
    assert format(run.context.trace_id, "032x") == trace_id, "the caller's trace is continued"
    assert format(run.parent.span_id, "016x") == parent
    assert run.attributes["agui.outcome"] == "completed" and run.attributes["agui.transport"] == "sse"
    assert run.attributes["agui.agent"] == "default", "the run names its agent"
    assert spans["agui.admission"].parent.span_id == run.context.span_id
    assert spans["agui.store.admit"].parent.span_id == spans["agui.admission"].context.span_id
    assert spans["agui.store.finish_run"].parent.span_id == run.context.span_id
    assert all(span.context.trace_id == run.context.trace_id for span in spans.values())


@pytest.mark.a2a
def test_a2a_agents_receive_the_trace_context(tmp_path):
    from tests.a2a_agent import A2AAgentServer

    agent = A2AAgentServer().start()
    try:
        settings = Settings(state_dir=str(tmp_path), allowed_cwd=("/tmp",), store="memory", agent="a2a+" + agent.url)
        trace_id = uuid.uuid4().hex
        with InProcessGateway(create_app(settings)) as server, httpx.Client() as client:
            headers = {"traceparent": f"00-{trace_id}-{uuid.uuid4().hex[:16]}-01"}
            assert post_sse(client, server.url + "/", run_body("plain"), headers=headers).terminal["type"] == "RUN_FINISHED"
        received = [tp for tp in agent.traceparents if tp]
        assert received and all(tp.split("-")[1] == trace_id for tp in received), agent.traceparents
        assert any(span.name == "a2a.SendStreamingMessage" for span in EXPORTER.get_finished_spans())
    finally:
        agent.stop()


@pytest.mark.a2a
def test_without_an_exporter_no_span_is_made_yet_a2a_agents_receive_the_callers_trace(tmp_path):
    """A gateway process with no OpenTelemetry SDK installed (the default): the caller's traceparent still reaches
    the agent, with the caller's trace id."""
    from tests.a2a_agent import A2AAgentServer
    from tests.support import Gateway

    agent = A2AAgentServer().start()
    gateway = Gateway(tmp_path, "--store", "memory", "--allowed-cwd", "/tmp", "--agent", "a2a+" + agent.url).start()
    try:
        trace_id = uuid.uuid4().hex
        with httpx.Client(timeout=30) as client:
            headers = {"traceparent": f"00-{trace_id}-{uuid.uuid4().hex[:16]}-01"}
            assert post_sse(client, gateway.url + "/", run_body("plain"), headers=headers).terminal["type"] == "RUN_FINISHED"
        received = [tp for tp in agent.traceparents if tp]
        assert received and all(tp.split("-")[1] == trace_id for tp in received), agent.traceparents
    finally:
        gateway.stop()
        agent.stop()
