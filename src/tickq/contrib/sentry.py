"""Sentry for tickq jobs: ``sentry_sdk.init(integrations=[TickqIntegration()])``.

Needs ``pip install 'tickq[sentry]'`` (``sentry-sdk``). Every attempt tickq runs in this
process then runs in a Sentry scope of its own, tagged ``tickq.job.type``,
``tickq.job.id``, ``tickq.job.attempt`` and ``tickq.queue``, with the payload's keys (never
its values) as the ``tickq`` context. A job's final failure is one Sentry event (every
failed attempt with ``every_failed_attempt=True``); tickq's own log line about it is
folded into that event rather than sent as a second one. With Sentry tracing on, each
attempt is a ``queue.process`` transaction continuing the trace the job was enqueued in.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

import sentry_sdk
from sentry_sdk.integrations import Integration
from sentry_sdk.scope import add_global_event_processor
from sentry_sdk.tracing import TransactionSource
from sentry_sdk.tracing_utils import has_tracing_enabled
from sentry_sdk.utils import event_from_exception

from ..job import queue_wait
from ..observe import watch

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from typing import Literal

    from ..job import Job, NewJob
    from ..store import Outcome

    Level = Literal["error", "warning"]

__all__ = ["TickqIntegration"]

ORIGIN = "auto.queue.tickq"
RUN_OPS = {"tickq tick": "queue.tick"}
"""The transaction op of each named run (``observe.running``); others are ``function``."""
REMEMBERED = 4096
"""How many reported (job, attempt) pairs are kept, to fold their log lines in."""


class TickqIntegration(Integration):
    """Report tickq job failures to Sentry, tagged with the job; trace attempts.

    ``every_failed_attempt``: report each attempt that raised, not only the one that
    failed the job for good (a retried attempt is reported at level ``warning``).
    ``propagate_traces``: carry the enqueuing request's Sentry trace in the job, so the
    attempt's transaction belongs to it.
    """

    identifier = "tickq"
    origin = ORIGIN

    def __init__(self, every_failed_attempt: bool = False, propagate_traces: bool = True) -> None:
        self.every_failed_attempt = every_failed_attempt
        self.propagate_traces = propagate_traces

    @staticmethod
    def setup_once() -> None:
        watch(SentryWatcher())
        add_global_event_processor(_fold_log_line)


def _integration() -> TickqIntegration | None:
    return sentry_sdk.get_client().get_integration(TickqIntegration)


class _Reported:
    """(job id, type, attempt) reported from this process, oldest forgotten first."""

    def __init__(self) -> None:
        self._seen: OrderedDict[tuple[Any, ...], None] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, key: tuple[Any, ...]) -> None:
        with self._lock:
            self._seen[key] = None
            while len(self._seen) > REMEMBERED:
                self._seen.popitem(last=False)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._seen

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()


REPORTED = _Reported()


def _fold_log_line(event: Any, hint: dict[str, Any]) -> Any:
    """Drop the event Sentry's logging integration makes of tickq's own line about an
    attempt this integration already reported; tag the others that name a job."""
    record = (hint or {}).get("log_record")
    if record is None or not record.name.startswith("tickq") or _integration() is None:
        return event
    job_id, attempt = getattr(record, "job_id", None), getattr(record, "attempt", None)
    job_type = getattr(record, "job_type", None)
    if job_id is None:
        return event
    if (job_id, job_type, attempt) in REPORTED:
        return None
    tags = event.setdefault("tags", {})
    tags.update({"tickq.job.id": str(job_id), "tickq.job.attempt": str(attempt)})
    if job_type is not None:
        tags["tickq.job.type"] = job_type
    return event


class SentryWatcher:
    """What ``tickq.observe`` asks of Sentry around enqueues, attempts and ticks."""

    @contextmanager
    def sending(self, jobs: Sequence[NewJob]) -> Iterator[Carrying]:
        integration = _integration()
        scope = sentry_sdk.get_current_scope()
        if integration is None or not _tracing() or scope.span is None:
            yield Carrying(integration, None)
            return
        name = jobs[0].type if len({job.type for job in jobs}) == 1 else "tickq enqueue"
        with sentry_sdk.start_span(op="queue.publish", name=name, origin=ORIGIN) as span:
            span.set_data("messaging.system", "tickq")
            span.set_data("messaging.destination.name", jobs[0].queue)
            yield Carrying(integration, span)

    @contextmanager
    def attempt(self, job: Job) -> Iterator[Reporting | Quiet]:
        integration = _integration()
        if integration is None:
            yield Quiet()
            return
        with sentry_sdk.isolation_scope() as scope:
            scope.clear_breadcrumbs()
            scope.set_tags(job_tags(job))
            payload = job.payload if isinstance(job.payload, dict) else {}
            scope.set_context("tickq", {"job_id": job.id, "job_type": job.type,
                                        "queue": job.queue, "attempt": job.attempts,
                                        "max_attempts": job.max_attempts,
                                        "payload_keys": sorted(payload)})  # fmt: skip
            with _transaction(job) as transaction:
                yield Reporting(integration, job, transaction)

    @contextmanager
    def running(self, name: str, attributes: Mapping[str, Any]) -> Iterator[Quiet]:
        if _integration() is None or not _tracing():
            yield Quiet()
            return
        with sentry_sdk.start_transaction(op=RUN_OPS.get(name, "function"), name=name,
                                          source=TransactionSource.TASK,
                                          origin=ORIGIN):  # fmt: skip
            yield Quiet()


def job_tags(job: Job) -> dict[str, str]:
    return {"tickq.job.type": job.type, "tickq.job.id": str(job.id),
            "tickq.job.attempt": str(job.attempts), "tickq.queue": job.queue}  # fmt: skip


def _tracing() -> bool:
    client = sentry_sdk.get_client()
    return bool(client.is_active()) and has_tracing_enabled(client.options)


def _transaction(job: Job) -> Any:
    if not _tracing():
        return nullcontext(None)
    carried = job.meta.get("trace")
    headers = carried if isinstance(carried, dict) else {}
    transaction = sentry_sdk.continue_trace(
        headers, op="queue.process", name=job.type, source=TransactionSource.TASK, origin=ORIGIN
    )
    transaction.set_data("messaging.destination.name", job.queue)
    transaction.set_data("messaging.message.id", str(job.id))
    transaction.set_data("messaging.message.retry.count", job.attempts - 1)
    waited = queue_wait(job)
    if waited is not None:
        transaction.set_data("messaging.message.receive.latency", round(waited * 1000))
    return sentry_sdk.start_transaction(transaction)


class Carrying:
    """An enqueue's ``queue.publish`` span (Sentry's Queues view reads it), and the trace
    headers (``sentry-trace``, ``baggage``) for the job to carry."""

    def __init__(self, integration: TickqIntegration | None, span: Any) -> None:
        self.integration, self.span = integration, span

    def carry(self) -> dict[str, str]:
        if self.integration is None or not self.integration.propagate_traces:
            return {}
        scope = sentry_sdk.get_current_scope()
        if scope.span is None:
            return {}
        return dict(scope.iter_trace_propagation_headers())

    def sent(self, ids: Sequence[int]) -> None:
        if self.span is not None and len(ids) == 1:
            self.span.set_data("messaging.message.id", str(ids[0]))


class Quiet:
    def ended(self, what: Any, exc: BaseException | None = None) -> None:
        pass


class Reporting:
    """One attempt: report its failure (the final one, or each), set the transaction's
    status."""

    def __init__(self, integration: TickqIntegration, job: Job, transaction: Any) -> None:
        self.integration, self.job, self.transaction = integration, job, transaction

    def ended(self, outcome: Outcome, exc: BaseException | None = None) -> None:
        kind = outcome.kind
        if self.transaction is not None:
            self.transaction.set_tag("tickq.job.outcome", kind)
            failed = kind in ("failed", "retried")
            self.transaction.set_status("internal_error" if failed else "ok")
        if kind == "failed" or (kind == "retried" and self.integration.every_failed_attempt):
            self._report(outcome, exc, "error" if kind == "failed" else "warning")

    def _report(self, outcome: Outcome, exc: BaseException | None, level: Level) -> None:
        job = self.job
        REPORTED.add((job.id, job.type, job.attempts))
        with sentry_sdk.new_scope() as scope:
            scope.set_tag("tickq.job.outcome", outcome.kind)
            scope.set_level(level)
            if exc is None:  # failed without raising: unrunnable payload, unknown type
                scope.capture_message((outcome.error or outcome.kind).split("\n", 1)[0])
                return
            event, hint = event_from_exception(
                exc, client_options=sentry_sdk.get_client().options,
                mechanism={"type": "tickq", "handled": False},
            )  # fmt: skip
            event["level"] = level
            scope.capture_event(event, hint=hint)
