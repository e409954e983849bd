"""Internal: tickq's spans and metrics through the OpenTelemetry API.

Imported only once the app has imported ``opentelemetry.trace`` (``tickq.observe``);
with no SDK configured, the API's no-op tracer and meter make every call here cheap.

Spans follow OpenTelemetry's messaging conventions: a PRODUCER span ``send <queue>``
around each enqueue, in the caller's current span, whose context the job row keeps
(``meta["trace"]``); a CONSUMER span ``process <queue>`` for each attempt, a *child* of
that context (so the run, however late and wherever, is in the request's trace) that
also *links* to it (the conventions require the link; the parent is what they allow for
one message processed alone, which is how tickq runs jobs).
"""

from __future__ import annotations

from contextlib import contextmanager
from weakref import WeakSet

from opentelemetry import context, metrics, propagate, trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from ._version import __version__
from .job import queue_wait

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from typing import Any

    from .job import Job, NewJob
    from .store import Outcome

SYSTEM = "tickq"
FAILED_OUTCOMES = ("failed", "retried")
"""Outcomes whose span gets an error status: the attempt failed (retried or not)."""
DURATION_BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)


class OtelWatcher:
    """Spans for enqueues, attempts and ticks; attempt and tick metrics."""

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        """The global providers unless given (tests give their own)."""
        self.tracer = trace.get_tracer("tickq", __version__, tracer_provider)
        self.meter = meter = metrics.get_meter("tickq", __version__, meter_provider)
        self._gauges: QueueGauges | None = None
        self.attempts = meter.create_counter(
            "tickq.attempts", "{attempt}", "Attempts run, by queue, type and outcome."
        )
        self.duration = meter.create_histogram(
            "tickq.job.duration", "s", "How long the job function ran, per attempt.",
            explicit_bucket_boundaries_advisory=DURATION_BOUNDS,
        )  # fmt: skip
        self.wait = meter.create_histogram(
            "tickq.job.queue_wait", "s", "From when the job was due (its enqueue, for one "
            "to run now) to when its attempt was claimed.",
            explicit_bucket_boundaries_advisory=DURATION_BOUNDS,
        )  # fmt: skip
        self.runs = meter.create_histogram(
            "tickq.run.duration", "s", "How long a tick (or another run) took, by name.",
            explicit_bucket_boundaries_advisory=DURATION_BOUNDS,
        )  # fmt: skip

    @contextmanager
    def sending(self, jobs: Sequence[NewJob]) -> Iterator[Sending]:
        queues = sorted({job.queue for job in jobs})
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM, "messaging.operation.type": "send",
            "messaging.operation.name": "send",
        }  # fmt: skip
        if len(queues) == 1:
            attributes["messaging.destination.name"] = queues[0]
        if len(jobs) == 1:
            attributes["tickq.job.type"] = jobs[0].type
        else:
            attributes["messaging.batch.message_count"] = len(jobs)
        name = f"send {queues[0]}" if len(queues) == 1 else "send"
        with self.tracer.start_as_current_span(name, kind=SpanKind.PRODUCER,
                                               attributes=attributes) as span:  # fmt: skip
            yield Sending(span)

    @contextmanager
    def attempt(self, job: Job) -> Iterator[Processing]:
        carried = job.meta.get("trace")
        parent = propagate.extract(carried) if isinstance(carried, dict) else None
        sender = trace.get_current_span(parent).get_span_context() if parent else None
        links = [Link(sender)] if sender is not None and sender.is_valid else None
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM, "messaging.operation.type": "process",
            "messaging.operation.name": "process", "messaging.destination.name": job.queue,
            "messaging.message.id": str(job.id), "tickq.job.type": job.type,
            "tickq.job.attempt": job.attempts,
        }  # fmt: skip
        with self.tracer.start_as_current_span(
            f"process {job.queue}", context=parent, kind=SpanKind.CONSUMER,
            attributes=attributes, links=links, record_exception=True,
            set_status_on_exception=True,
        ) as span:  # fmt: skip
            yield Processing(self, span, job)

    @contextmanager
    def running(self, name: str, attributes: Mapping[str, Any]) -> Iterator[Running]:
        with self.tracer.start_as_current_span(name, attributes=dict(attributes)) as span:
            yield Running(self, span, name)

    def queues(self, store: Any) -> None:
        """Gauge ``store``'s due and running jobs per queue from now on."""
        if self._gauges is None:
            self._gauges = QueueGauges(self.meter)
        self._gauges.stores.add(store)


class Sending:
    __slots__ = ("span",)

    def __init__(self, span: Any) -> None:
        self.span = span

    def carry(self) -> dict[str, str]:
        carrier: dict[str, str] = {}
        if self.span.get_span_context().is_valid:
            propagate.inject(carrier, context.get_current())
        return carrier

    def sent(self, ids: Sequence[int]) -> None:
        if len(ids) == 1:
            self.span.set_attribute("messaging.message.id", str(ids[0]))


class Processing:
    __slots__ = ("job", "span", "watcher")

    def __init__(self, watcher: OtelWatcher, span: Any, job: Job) -> None:
        self.watcher, self.span, self.job = watcher, span, job

    def ended(self, outcome: Outcome, exc: BaseException | None = None) -> None:
        job, kind = self.job, outcome.kind
        self.span.set_attribute("tickq.job.outcome", kind)
        if kind in FAILED_OUTCOMES:
            if exc is not None:
                self.span.record_exception(exc)
            first = (outcome.error or kind).split("\n", 1)[0]
            self.span.set_status(Status(StatusCode.ERROR, first))
        labels = {"messaging.destination.name": job.queue, "tickq.job.type": job.type}
        self.watcher.attempts.add(1, {**labels, "tickq.job.outcome": kind})
        self.watcher.duration.record(outcome.duration, labels)
        waited = queue_wait(job)
        if waited is not None:
            self.watcher.wait.record(waited, labels)


class Running:
    __slots__ = ("name", "span", "watcher")

    def __init__(self, watcher: OtelWatcher, span: Any, name: str) -> None:
        self.watcher, self.span, self.name = watcher, span, name

    def ended(self, report: Any, exc: BaseException | None = None) -> None:
        if isinstance(report, dict):
            for key, value in flat(report):
                self.span.set_attribute(f"tickq.{key}", value)
            ms = report.get("duration_ms")
            if isinstance(ms, int | float):
                self.watcher.runs.record(ms / 1000, {"tickq.run": self.name})


def flat(report: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """A report's scalar figures, nested ones named ``jobs.claimed``."""
    for key, value in report.items():
        if type(value) in (int, float, str, bool):
            yield prefix + key, value
        elif isinstance(value, dict) and not prefix:
            yield from flat(value, f"{key}.")


class QueueGauges:
    """Due and running jobs per queue, as two observable gauges over every store a cycle
    ran on in this process, read from the database when the SDK collects (as a Prometheus
    scrape reads ``q.stats()``). A queue seen once reads 0 when empty, not nothing."""

    def __init__(self, meter: Any) -> None:
        self.stores: WeakSet[Any] = WeakSet()
        self._known: set[str] = set()
        self._read: dict[str, tuple[int, int]] = {}
        self._unread: set[int] = set()  # the gauges yet to use ``_read``
        due = "Pending jobs whose run_after has passed, by queue."
        meter.create_observable_gauge("tickq.jobs.due", [self._reading(1)], "{job}", due)
        running = "Jobs running, by queue."
        meter.create_observable_gauge("tickq.jobs.running", [self._reading(2)], "{job}", running)

    def counts(self, which: int) -> dict[str, tuple[int, int]]:
        """(due, running) by queue: the other gauge of the same collection reuses what one
        gauge read, so a collection costs one query per store."""
        if which in self._unread:
            self._unread.discard(which)
            return self._read
        counts: dict[str, tuple[int, int]] = {}
        for store in list(self.stores):
            for queue, due, running in store.queue_gauges():
                was = counts.get(queue, (0, 0))
                counts[queue] = (was[0] + due, was[1] + running)
        self._read, self._unread = counts, {1, 2} - {which}
        self._known.update(counts)
        return counts

    def _reading(self, which: int) -> Any:
        def callback(options: Any) -> list[metrics.Observation]:
            counts = self.counts(which)
            return [metrics.Observation(counts.get(q, (0, 0))[which - 1],
                                        {"messaging.destination.name": q})
                    for q in sorted(self._known)]  # fmt: skip

        return callback
