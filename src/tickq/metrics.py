"""Prometheus metrics, read from the jobs table at scrape time.

Because every figure comes from the database (``q.stats()``), one scrape of any process
is right for all of them: no per-process counters to add up, nothing lost on restart.
Processed totals and the duration histogram count pruned jobs too (pruning rolls them
up first), so they only ever go up.

>>> text = render(q)                      # the exposition text
>>> app = MetricsApp(q)                   # ASGI: GET -> text, bearer TICKQ_METRICS_TOKEN

Needs ``pip install 'tickq[metrics]'`` (``prometheus_client``), imported only when used.
"""

from __future__ import annotations

import asyncio
import hmac
import os
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError, TickqError
from .job import JobState

if TYPE_CHECKING:
    from .queue import Queue

TOKEN_ENV = "TICKQ_METRICS_TOKEN"
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


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


class MetricsApp:
    """ASGI app serving ``render(queue)`` to ``GET`` with ``Authorization: Bearer <token>``.

    The token comes from ``TICKQ_METRICS_TOKEN`` (or ``token=``); while it is unset the
    endpoint is off and answers 503. A wrong or missing token gets 401.
    """

    def __init__(self, queue: Queue, token: str | None = None) -> None:
        self.queue = queue
        self.token = token if token is not None else os.environ.get(TOKEN_ENV, "")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        status, headers, body = await self.respond(scope)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        with_body = scope.get("method", "GET") != "HEAD"
        await send({"type": "http.response.body", "body": body if with_body else b""})

    async def respond(self, scope: Scope) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        if scope.get("method", "GET") not in ("GET", "HEAD"):
            return _text(405, "use GET\n", [(b"allow", b"GET, HEAD")])
        if not self.token:
            return _text(503, f"metrics are off: set {TOKEN_ENV} to turn them on\n")
        if not self.authorised(scope):
            return _text(401, "missing or wrong bearer token\n", [(b"www-authenticate", b"Bearer")])
        try:
            body = await asyncio.to_thread(render, self.queue)
        except TickqError as exc:
            return _text(503, f"{exc}\n")
        content_type = _prometheus().CONTENT_TYPE_LATEST.encode()
        return (
            200,
            [(b"content-type", content_type), (b"cache-control", b"no-store")],
            body.encode(),
        )

    def authorised(self, scope: Scope) -> bool:
        header = dict(scope.get("headers") or []).get(b"authorization", b"")
        scheme, _, given = header.decode("latin-1").partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(given.strip().encode(), self.token.encode())


def _text(
    status: int, message: str, extra: list[tuple[bytes, bytes]] | None = None
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    headers = [(b"content-type", b"text/plain; charset=utf-8"), *(extra or [])]
    return status, headers, message.encode()


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
