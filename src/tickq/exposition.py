"""Internal: ``Queue.stats()`` as Prometheus metric families and exposition text.

Public through ``tickq.metrics``; the web endpoint renders its ``/metrics`` route here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError
from .job import JobState

if TYPE_CHECKING:
    from typing import Protocol

    class HasStats(Protocol):
        """A ``Queue`` (or anything whose ``stats()`` is a ``Queue.stats()`` report)."""

        def stats(self) -> dict[str, Any]: ...


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

    def __init__(self, queue: HasStats) -> None:
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
        "lease_expired; refunded, released and snoozed: runs not counted as attempts), pruned jobs "
        "included.",
        labels=["queue", "type", "outcome"],
    )
    for queue, types in sorted(stats["processed"].items()):
        for job_type, outcomes in sorted(types.items()):
            for outcome, count in sorted(outcomes.items()):
                processed.add_metric([queue, job_type, outcome], count)
    return [jobs, *_gauges(core, stats), processed, _durations(core, stats), _runs(core, stats)]


WORKFLOW_STATUSES = ("running", "waiting", "done", "failed", "cancelled")


def _runs(core: Any, stats: dict[str, Any]) -> Any:
    runs = core.GaugeMetricFamily(
        "tickq_workflow_runs", "Workflow runs in the table, by workflow and status.",
        labels=["workflow", "status"],
    )  # fmt: skip
    for workflow, counts in sorted(stats.get("workflow_runs", {}).items()):
        for status in WORKFLOW_STATUSES:
            runs.add_metric([workflow, status], counts.get(status, 0))
    return runs


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


def render(queue: HasStats) -> str:
    """The Prometheus text exposition of ``queue``'s figures."""
    prometheus = _prometheus()
    registry = prometheus.CollectorRegistry(auto_describe=False)
    registry.register(TickqCollector(queue))
    text: bytes = prometheus.generate_latest(registry)
    return text.decode()


CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""Prometheus' text exposition format (prometheus_client's CONTENT_TYPE_LATEST)."""
