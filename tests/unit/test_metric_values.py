"""The lock-free metrics expose what prometheus_client's own metrics would: the same updates on both, each in a
registry of its own, give the same samples (names, labels, values, bucket bounds), parsed by the client's parser."""

from __future__ import annotations

import prometheus_client
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gateway import metric_values

BUCKETS = (0.0005, 0.001, 0.01, 0.5, 1.0, 5.0)


def _define(kinds, registry):
    return {
        "started": kinds.Counter("t_started", "Runs.", ["transport"], registry=registry),
        "adoptions": kinds.Counter("t_adoptions", "Adoptions.", registry=registry),
        "open": kinds.Gauge("t_open", "Open streams.", ["kind"], registry=registry),
        "in_flight": kinds.Gauge("t_in_flight", "In flight.", registry=registry),
        "latency": kinds.Histogram("t_latency_seconds", "Latency.", ["operation"], buckets=BUCKETS, registry=registry),
        "plain": kinds.Histogram("t_plain_seconds", "Unlabelled.", buckets=BUCKETS, registry=registry),
    }


def _update(m):
    m["started"].labels("sse").inc()
    m["started"].labels("sse").inc(2)
    m["started"].labels("ws").inc()
    m["adoptions"].inc()
    m["open"].labels("sse").inc()
    m["open"].labels("sse").inc()
    m["open"].labels("sse").dec()
    m["open"].labels("websocket").set(7)
    m["in_flight"].inc(3)
    m["in_flight"].dec()
    # Values on a bound count in that bound's bucket (`le`), and one above every bound only in +Inf.
    for value in (0.0, 0.0005, 0.0007, 0.001, 0.3, 5.0, 12.0):
        m["latency"].labels("admit").observe(value)
    m["latency"].labels("renew").observe(0.002)
    m["plain"].observe(0.75)


def _samples(registry):
    text = generate_latest(registry).decode()
    return {
        (family.name, family.type, sample.name, tuple(sorted(sample.labels.items())), sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.name.endswith("_created")  # prometheus_client's own creation times: not kept here
    }


def test_every_kind_exposes_the_samples_prometheus_client_would():
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    _update(_define(metric_values, ours))
    _update(_define(prometheus_client, theirs))
    assert _samples(ours) == _samples(theirs)
    assert ("t_latency_seconds", "histogram", "t_latency_seconds_bucket", (("le", "0.001"), ("operation", "admit")), 4.0) in _samples(ours)


def test_before_any_update_the_families_are_declared_and_unlabelled_ones_read_zero():
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    _define(metric_values, ours)
    _define(prometheus_client, theirs)
    assert _samples(ours) == _samples(theirs)
    declared = generate_latest(ours).decode()
    assert "# TYPE t_started_total counter" in declared and "# TYPE t_latency_seconds histogram" in declared


def test_label_values_must_match_the_label_names():
    registry = CollectorRegistry()
    m = _define(metric_values, registry)
    with pytest.raises(ValueError):
        m["started"].labels("sse", "extra")
    with pytest.raises(ValueError):
        m["started"].inc()
    assert m["started"].labels("sse") is m["started"].labels("sse")
