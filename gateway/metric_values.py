"""Counters, gauges and histograms kept as plain numbers, read by prometheus_client's registry only when scraped:
its own metric objects take a lock and run two checks on every update, and a short run makes about 20 updates.
Only the event loop's thread updates these; the scrape,
on the exporter's thread, only reads them."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from prometheus_client import REGISTRY
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString


class Value:
    """One counter's or gauge's child: a number."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount

    def dec(self, amount: float = 1.0) -> None:
        self.value -= amount

    def set(self, value: float) -> None:
        self.value = value


class Distribution:
    """One histogram's child: a count per bucket (made cumulative when scraped) and the sum."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one: above every bound (+Inf)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # the first bucket whose bound is >= value (`le`)
        self.sum += value

    def buckets(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        total = 0
        for bound, count in zip((*map(floatToGoString, self.bounds), "+Inf"), self.counts, strict=True):
            total += count
            out.append((bound, total))
        return out


class _Family(Collector):
    """A metric and its children by label values; with no label names, the metric is its own only child. Registered
    in `registry` as prometheus_client's own metrics are."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str] = (), *, registry: CollectorRegistry = REGISTRY) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.children: dict[tuple[str, ...], Any] = {}
        if not self.labelnames:
            self.labels()  # a metric without labels reads 0 before its first update
        registry.register(self)

    def _child(self) -> Any:
        raise NotImplementedError

    def labels(self, *values: str) -> Any:
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name} takes the labels {self.labelnames}")
        child = self.children.get(values)
        if child is None:
            child = self.children[values] = self._child()
        return child

    def _unlabelled(self) -> Any:
        if self.labelnames:
            raise ValueError(f"{self.name} has labels: use labels()")
        return self.children[()]

    def metric(self) -> Metric:
        raise NotImplementedError

    def collect(self) -> Iterator[Metric]:
        yield self.metric()


class Counter(_Family):
    exposed_as: type[CounterMetricFamily | GaugeMetricFamily] = CounterMetricFamily

    def _child(self) -> Value:
        return Value()

    def inc(self, amount: float = 1.0) -> None:
        self._unlabelled().inc(amount)

    def metric(self) -> Metric:
        family = self.exposed_as(self.name, self.documentation, labels=self.labelnames)
        for values, child in list(self.children.items()):
            family.add_metric(list(values), child.value)
        return family


class Gauge(Counter):
    exposed_as = GaugeMetricFamily

    def dec(self, amount: float = 1.0) -> None:
        self._unlabelled().dec(amount)

    def set(self, value: float) -> None:
        self._unlabelled().set(value)

    def read_from(self, read: Callable[[], float]) -> None:
        """The unlabelled value is `read()` at each scrape (a number kept elsewhere, updated with no call here)."""
        self._unlabelled()  # a gauge without labels
        self.children[()] = _Read(read)


class _Read:
    """A gauge's child whose value is read when scraped."""

    __slots__ = ("read",)

    def __init__(self, read: Callable[[], float]) -> None:
        self.read = read

    @property
    def value(self) -> float:
        return self.read()


class Histogram(_Family):
    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        *,
        buckets: Sequence[float],
        registry: CollectorRegistry = REGISTRY,
    ) -> None:
        self.bounds = tuple(sorted(float(bound) for bound in buckets if bound != float("inf")))
        super().__init__(name, documentation, labelnames, registry=registry)

    def _child(self) -> Distribution:
        return Distribution(self.bounds)

    def observe(self, value: float) -> None:
        self._unlabelled().observe(value)

    def metric(self) -> Metric:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for values, child in list(self.children.items()):
            family.add_metric(list(values), child.buckets(), child.sum)
        return family
