"""Prometheus metrics, read from the jobs table at scrape time.

Because every figure comes from the database (``q.stats()``), one scrape of any process
is right for all of them: no per-process counters to add up, nothing lost on restart.
Processed totals and the duration histogram count pruned jobs too (pruning rolls them
up first), so they only ever go up.

>>> text = render(q)                      # the exposition text
>>> app = q.asgi_app(metrics=True)        # GET /metrics, bearer TICKQ_METRICS_TOKEN

Needs ``pip install 'tickq[metrics]'`` (``prometheus_client``), imported only when used.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError
from .job import JobState

if TYPE_CHECKING:
    from .queue import Queue


def _prometheus() -> Any:
    try:
        import prometheus_client
        import prometheus_client.core
    except ImportError as exc:
        raise ConfigurationError(
            "tickq metrics need prometheus_client: pip install 'tickq[metrics]'"
        ) from exc
    return prometheus_client


class TickqCollector:
    """A Prometheus collector that reads ``queue.stats()`` on every scrape."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue

    def collect(self) -> Iterator[Any]:
        return iter(families(self.queue.stats()))


def families(stats: dict[str, Any]) -> list[Any]:
    """The metric families for one ``q.stats()`` result."""
    core = _prometheus().core
    jobs = core.GaugeMetricFamily(
        "tickq_jobs", "Jobs in the table, by queue and status.", labels=["queue", "status"]
    )
    for queue, counts in sorted(stats["by_queue"].items()):
        for status in JobState:
            jobs.add_metric([queue, status.value], counts.get(status.value, 0))
    processed = core.CounterMetricFamily(
        "tickq_processed",
        "Finished attempts by queue, type and outcome (done, error, cancelled, "
        "lease_expired), pruned jobs included.",
        labels=["queue", "type", "outcome"],
    )
    for queue, types in sorted(stats["processed"].items()):
        for job_type, outcomes in sorted(types.items()):
            for outcome, count in sorted(outcomes.items()):
                processed.add_metric([queue, job_type, outcome], count)
    return [jobs, *_gauges(core, stats), processed, _durations(core, stats)]


def _gauges(core: Any, stats: dict[str, Any]) -> list[Any]:
    return [
        core.GaugeMetricFamily(
            "tickq_due_jobs", "Pending jobs whose run_after has passed.", value=stats["due"]
        ),
        core.GaugeMetricFamily(
            "tickq_oldest_due_job_age_seconds",
            "How long the oldest due job has been waiting (0 when none is due).",
            value=stats["oldest_due_age_seconds"] or 0,
        ),
        core.GaugeMetricFamily(
            "tickq_failed_last_hour",
            "Jobs that reached failed in the last hour.",
            value=stats["failed_last_hour"],
        ),
        core.GaugeMetricFamily(
            "tickq_failed_attempts_last_hour",
            "Attempts that failed (error or lease expired) in the last hour.",
            value=stats["failed_attempts_last_hour"],
        ),
    ]


def _durations(core: Any, stats: dict[str, Any]) -> Any:
    histogram = core.HistogramMetricFamily(
        "tickq_job_duration_seconds",
        "How long finished attempts ran, by queue and type.",
        labels=["queue", "type"],
    )
    for queue, types in sorted(stats["duration_seconds"].items()):
        for job_type, h in sorted(types.items()):
            histogram.add_metric([queue, job_type], list(h["buckets"].items()), h["sum"])
    return histogram


def render(queue: Queue) -> str:
    """The Prometheus text exposition of ``queue``'s figures."""
    prometheus = _prometheus()
    registry = prometheus.CollectorRegistry(auto_describe=False)
    registry.register(TickqCollector(queue))
    return prometheus.generate_latest(registry).decode()


CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""Prometheus' text exposition format (prometheus_client's CONTENT_TYPE_LATEST)."""


def MetricsApp(queue: Queue, token: str | None = None, path: str = "/metrics") -> Any:
    """An ASGI app serving only ``GET /metrics``, to mount where you like.

    The same route ``q.asgi_app(metrics=True)`` adds beside the tick: bearer token from
    ``token=`` or ``TICKQ_METRICS_TOKEN`` (503 while unset, 401 when missing or wrong).
    """
    from .web.asgi import AsgiApp
    from .web.endpoint import Endpoint, EndpointOptions

    endpoint = Endpoint(queue, EndpointOptions(metrics=True, metrics_path=path,
                                               metrics_token=token))  # fmt: skip
    endpoint.routes = [r for r in endpoint.routes if r.name == "metrics"]
    return AsgiApp(endpoint)
