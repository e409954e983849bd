"""When to alert, and how alerts travel: as tickq jobs, grouped per job type and window.

A failed attempt (or a job reaching ``failed``) of type T enqueues one ``tickq.alert`` job
for T's current window, with a unique key: however many failures, in however many
processes, the window gets one. When the window has closed that job reads the failures
from the table, decides whether they are worth an alert, logs it, and enqueues one
``tickq.alert_delivery`` job per sink. Each delivery retries on its own, so a sink that is
down delays only itself, and nothing here runs inside the failing job's worker call.

The first job of T to reach ``failed`` after a quiet window (none failed in the window
before) also enqueues a *first* alert job, due ``group_wait`` later: it reports what failed
from the window's start until then, and the window's own job reports only what came after
(the follow-up), so a storm still makes two alerts, never one per failure.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from ..errors import Cancel, ConfigurationError
from ..job import Job
from ..logger import LazyLogger
from .alert import Alert, failures_alert, tick_overdue_alert
from .sinks import Sink, sink_name, sinks_from_env

TYPE_CHECKING = False  # typing costs a waking host milliseconds of import
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any, Protocol

    from ..store import SqlStore

    class Queue(Protocol):
        """What alerts need of the ``Queue`` they are attached to (no import of it)."""

        @property
        def _store(self) -> SqlStore: ...
        def job(self, *args: Any, **options: Any) -> Any: ...
        def on_failure(self, hook: Callable[[Job], Any]) -> Callable[[Job], Any]: ...
        def on_retry(self, hook: Callable[[Job], Any]) -> Callable[[Job], Any]: ...
        def enqueue(self, *args: Any, **options: Any) -> int: ...
        def enqueue_many(self, jobs: Iterable[Any], *, conn: Any = None) -> list[int]: ...
        def process_jobs(self, limit: int = 100, time_budget: float | None = None,
                         *, queues: Sequence[str] | None = None) -> dict[str, Any]: ...  # fmt: skip


log = LazyLogger("tickq.alerts")

ALERT_QUEUE = "tickq.alerts"
COMPOSE_TYPE = "tickq.alert"
DELIVER_TYPE = "tickq.alert_delivery"
INTERNAL_TYPES = (COMPOSE_TYPE, DELIVER_TYPE)
GRACE = timedelta(seconds=10)
"""Wait this long (at most a tenth of the window) after a window closes, so failures
recorded at its very end are counted."""
GROUP_WAIT = timedelta(seconds=30)
"""Alertmanager's default: long enough to gather a burst, short enough to act on."""
JUST_AFTER = timedelta(microseconds=1)
TICK_OVERDUE_WINDOW = timedelta(hours=1)
"""A missing tick is alerted at most once per hour (or per window, if longer) while it lasts."""
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_SEEN = 10_000
PAGE = 200


class Alerts:
    """Alert sinks and rules. Pass to ``Queue(alerts=...)``, or pass a list of sinks.

    ``window``: failures of one job type are grouped per window (aligned to the clock) into
    one alert, sent once the window closes. ``group_wait``: but the first job to fail after
    a quiet window (no job of its type failed in the window before) is alerted this long
    after it failed (at most ``window``), and the window's alert then reports only the
    failures that came after: a first alert within ``group_wait``, one follow-up at most.
    A tick that recorded a failure sends its first alert before it returns (nothing else
    runs on a sleeping host until the next call). ``repeated_failures``: alert when this
    many attempts of one type fail within a window even if none has run out of attempts.
    A job reaching ``failed`` always alerts. ``queue`` is where alert jobs run: a worker
    limited to other queues must include it. With ``from_env`` the sinks named by
    ``TICKQ_ALERT_WEBHOOK_URL`` and ``TICKQ_ALERT_EMAIL_TO`` + ``TICKQ_SMTP_URL`` are added.
    """

    def __init__(
        self,
        sinks: Sequence[Sink] = (),
        *,
        window: timedelta = timedelta(minutes=10),
        group_wait: timedelta = GROUP_WAIT,
        repeated_failures: int = 5,
        queue: str = ALERT_QUEUE,
        from_env: bool = True,
    ) -> None:
        if not isinstance(window, timedelta) or window < timedelta(seconds=1):
            raise ConfigurationError(f"alert window must be a timedelta >= 1s, got {window!r}")
        if not isinstance(group_wait, timedelta) or group_wait < timedelta(0):
            raise ConfigurationError(
                f"group_wait must be a timedelta >= 0 (e.g. timedelta(seconds=30)), "
                f"got {group_wait!r}"
            )
        if repeated_failures < 1:
            raise ConfigurationError(f"repeated_failures must be >= 1, got {repeated_failures}")
        for sink in sinks:
            if not callable(sink):
                raise ConfigurationError(
                    f"alert sink {sink!r} is not callable; use Webhook(...), Email(...) or a "
                    "function taking the Alert"
                )
        self.window, self.repeated_failures, self.queue = window, repeated_failures, queue
        self.from_env, self.group_wait = from_env, group_wait
        self._at_once = threading.local()
        self._configured = list(sinks)
        self.sinks: dict[str, Sink] = {}
        self._queue: Queue | None = None
        self._seen: set[str] = set()

    def __repr__(self) -> str:
        return f"Alerts(sinks={list(self.sinks) or self._configured}, window={self.window})"

    @property
    def enabled(self) -> bool:
        """True when some sink besides the log is configured (alerts then travel as jobs)."""
        return bool(self.sinks)

    def bind(self, queue: Queue) -> Alerts:
        """This configuration attached to ``queue`` (a copy if already attached elsewhere)."""
        bound = self if self._queue is None else self._copy()
        bound._queue = queue
        bound.sinks = named_sinks(bound._configured + (sinks_from_env() if self.from_env else []))
        if bound.sinks:
            bound._register(queue)
        return bound

    def _copy(self) -> Alerts:
        return Alerts(self._configured, window=self.window, queue=self.queue,
                      repeated_failures=self.repeated_failures, from_env=self.from_env,
                      group_wait=self.group_wait)  # fmt: skip

    def _register(self, queue: Queue) -> None:
        queue.job(name=COMPOSE_TYPE, queue=self.queue, priority=100, max_attempts=5,
                  backoff=(10, 60, 300, 900))(self.compose)  # fmt: skip
        queue.job(name=DELIVER_TYPE, queue=self.queue, priority=100, max_attempts=8,
                  backoff=(30, 60, 300, 900, 1800, 3600, 3600))(self.deliver_one)  # fmt: skip
        queue.on_failure(self.job_failed)
        queue.on_retry(self.attempt_failed)

    # -- triggers (failure hooks; the queue logs anything they raise) ---------------------
    def job_failed(self, job: Job) -> None:
        """A job reached ``failed``: make sure its type's window has an alert job."""
        if job.type == DELIVER_TYPE:
            log.error("tickq alert sink %s kept failing; gave up on alert %r after %s "
                      "attempts: %s", job.payload.get("sink"),
                      job.payload.get("alert", {}).get("title"), job.attempts,
                      (job.last_error or "").split("\n", 1)[0])  # fmt: skip
        elif job.type != COMPOSE_TYPE:
            self._group(job)
            self._first(job)

    def attempt_failed(self, job: Job) -> None:
        """An attempt failed and will be retried: counts toward ``repeated_failures``."""
        if job.type not in INTERNAL_TYPES:
            self._group(job)

    def _group(self, job: Job) -> None:
        start = window_start(job.finished_at or job.updated_at, self.window)
        key = f"alert:{job.type}:{start.isoformat()}"
        if key in self._seen:
            return
        end = start + self.window
        self._enqueue_compose(
            {"kind": "failures", "job_type": job.type, "window_start": start.isoformat(),
             "window_end": end.isoformat()}, key, run_after=end + min(GRACE, self.window / 10),
        )  # fmt: skip

    def _first(self, job: Job) -> None:
        """The first failure after a quiet window: a first alert, due ``group_wait`` later
        (inside ``at_once``: when it ends), reporting the window's failures until then."""
        failed_at = job.finished_at or job.updated_at
        start = window_start(failed_at, self.window)
        key = f"alert:{job.type}:{start.isoformat()}:first"
        pending = getattr(self._at_once, "pending", None)
        if key in self._seen or (pending is not None and key in pending):
            return
        if self._bound()._store.failure_summary(job.type, start - self.window, start)[
            "failed_jobs"
        ]:
            self._remember(key)  # not quiet: the window before had failures; follow-up only
            return
        if pending is not None:
            pending[key] = (job.type, start)
            return
        until = failed_at + min(self.group_wait, self.window)
        self._enqueue_first(key, job.type, start, max(until, failed_at + JUST_AFTER), until)

    def _enqueue_first(
        self, key: str, job_type: str, start: datetime, end: datetime, due: datetime | None
    ) -> None:
        end = min(end, start + self.window)  # a window's failures go in its own alerts
        self._enqueue_compose(
            {"kind": "first", "job_type": job_type, "window_start": start.isoformat(),
             "window_end": end.isoformat()}, key, run_after=due,
        )  # fmt: skip

    @contextmanager
    def at_once(self) -> Iterator[None]:
        """First alerts of failures recorded inside (on this thread) are enqueued when it
        ends, due at once and counting every failure until then: for a tick, which then
        delivers them before it returns (``deliver``). Never raises."""
        pending: dict[Any, Any] = {}
        self._at_once.pending = pending
        try:
            yield
        finally:
            self._at_once.pending = None
            if pending:
                self._enqueue_pending(pending)

    def _enqueue_pending(self, pending: dict[str, tuple[str, datetime]]) -> None:
        try:
            end = self._bound()._store.now() + JUST_AFTER
            for key, (job_type, start) in pending.items():
                self._enqueue_first(key, job_type, start, end, None)
        except Exception:
            log.exception("tickq could not raise the first alert of a failure")

    def tick_overdue(
        self,
        last_tick_at: datetime | None,
        expected_every: timedelta,
        *,
        now: datetime | None = None,
    ) -> int | None:
        """Alert that the tick has not come: call it from the health check when overdue.

        One alert per hour (or per window, if longer) however often it is called; never
        raises. Returns the alert job's id, or None when only the log sink is configured.
        Nothing processes jobs while the tick is missing, so follow with ``deliver()``.
        """
        try:
            now = now or self._bound()._store.now()
            start = overdue_period(last_tick_at, expected_every, now,
                                   max(self.window, TICK_OVERDUE_WINDOW))  # fmt: skip
            key = f"alert:tick_overdue:{start.isoformat()}"
            if key in self._seen:
                return None
            if not self.enabled:
                self._remember(key)
                self.log(tick_overdue_alert(last_tick_at, expected_every, now))
                return None
            detail = {"last_tick_at": last_tick_at.isoformat() if last_tick_at else None,
                      "expected_every_seconds": expected_every.total_seconds(),
                      "now": now.isoformat()}  # fmt: skip
            return self._enqueue_compose(
                {"kind": "tick_overdue", "window_start": start.isoformat(), "detail": detail},
                key,
            )
        except Exception:
            log.exception("tickq could not raise the tick-overdue alert")
            return None

    def deliver(self, time_budget: float = 5.0, limit: int = 20) -> dict[str, Any] | None:
        """Run due alert jobs now, within ``time_budget`` seconds; never raises."""
        if not self.enabled:
            return None
        try:
            return self._bound().process_jobs(limit, time_budget, queues=[self.queue])
        except Exception:
            log.exception("tickq could not deliver alerts now; they stay queued")
            return None

    def _enqueue_compose(
        self, payload: dict[str, Any], key: str, run_after: datetime | None = None
    ) -> int:
        job_id = self._bound().enqueue(
            COMPOSE_TYPE, payload, run_after=run_after, unique_key=key, unique_scope="all"
        )
        self._remember(key)
        return job_id

    def _remember(self, key: str) -> None:
        if len(self._seen) >= MAX_SEEN:
            self._seen.clear()
        self._seen.add(key)

    # -- the two alert jobs ---------------------------------------------------------------
    def compose(
        self,
        kind: str,
        job_type: str | None = None,
        window_start: str | None = None,
        window_end: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        """Job ``tickq.alert``: decide on one window's alert, log it, fan it out to sinks."""
        if kind in ("failures", "first") and job_type and window_start and window_end:
            start, end = datetime.fromisoformat(window_start), datetime.fromisoformat(window_end)
            key = f"alert:{job_type}:{window_start}"
            if kind == "first":
                key += ":first"
            else:  # the follow-up: what the first alert (if any) has not reported
                start = max(start, self._first_alert_end(key, start) or start)
            summary = self._bound()._store.failure_summary(job_type, start, end)
            alert = failures_alert(job_type, start, end, summary, self.repeated_failures)
        elif kind == "tick_overdue" and detail:
            last = detail.get("last_tick_at")
            alert = tick_overdue_alert(
                datetime.fromisoformat(last) if last else None,
                timedelta(seconds=detail["expected_every_seconds"]),
                datetime.fromisoformat(detail["now"]),
            )
            key = f"alert:tick_overdue:{window_start}"
        else:
            raise Cancel(f"unknown alert job payload: kind={kind!r}, job_type={job_type!r}")
        if alert is None:
            log.info("tickq: %s failures of %s %s to %s are below the alert threshold",
                     kind, job_type, window_start, window_end)  # fmt: skip
            return
        self.dispatch(alert, key)

    def _first_alert_end(self, key: str, since: datetime) -> datetime | None:
        """Until when the window's first alert (if one was raised) reported failures: its
        job is among the alert jobs created since the window began (newest first)."""
        store, wanted, before = self._bound()._store, f"{key}:first", None
        while True:
            jobs = store.list_jobs(type=COMPOSE_TYPE, limit=PAGE, before_id=before)
            for job in jobs:
                if job.unique_key == wanted and isinstance(job.payload, dict):
                    return datetime.fromisoformat(job.payload["window_end"])
            if len(jobs) < PAGE or (jobs[-1].created_at or since) < since:
                return None
            before = jobs[-1].id

    def dispatch(self, alert: Alert, key: str) -> None:
        """Log ``alert`` (the log sink) and enqueue one delivery job per sink."""
        self.log(alert)
        self._bound().enqueue_many(
            (DELIVER_TYPE, {"sink": name, "alert": alert.to_dict()},
             {"unique_key": f"{key}:{name}", "unique_scope": "all"})
            for name in self.sinks
        )  # fmt: skip

    def deliver_one(self, sink: str, alert: dict[str, Any]) -> None:
        """Job ``tickq.alert_delivery``: hand one alert to one sink; raising retries it."""
        target = self.sinks.get(sink)
        if target is None:
            raise ConfigurationError(
                f"alert sink {sink!r} is not configured in this process (configured: "
                f"{', '.join(self.sinks) or 'none'}); configure the same alerts in every "
                "process that runs jobs (the TICKQ_ALERT_* variables do that)"
            )
        target(Alert.from_dict(alert))
        log.info("tickq alert %r delivered to %s", alert.get("title"), sink)

    @staticmethod
    def log(alert: Alert) -> None:
        """The log sink: always on."""
        log.error("%s\n%s", alert.title, alert.text,
                  extra={"alert_kind": alert.kind, "job_type": alert.job_type})  # fmt: skip

    def _bound(self) -> Queue:
        if self._queue is None:
            raise ConfigurationError("these Alerts are not attached to a Queue; pass them to "
                                     "Queue(alerts=...)")  # fmt: skip
        return self._queue


def configure_alerts(queue: Queue, alerts: Alerts | Sequence[Sink] | Sink | None) -> Alerts:
    """``Queue(alerts=...)``: an ``Alerts``, a list of sinks, one sink, or None (env only)."""
    if isinstance(alerts, Alerts):
        return alerts.bind(queue)
    if alerts is None:
        sinks: list[Sink] = []
    elif callable(alerts):
        sinks = [alerts]
    elif isinstance(alerts, str | bytes | dict):
        raise ConfigurationError(
            f"alerts must be a list of sinks (Webhook, Email or callables), got {alerts!r}"
        )
    else:
        sinks = list(alerts)
    return Alerts(sinks).bind(queue)


def named_sinks(sinks: Sequence[Sink]) -> dict[str, Sink]:
    """Sinks by stable name. Named sinks configured twice (code and env) count once;
    unnamed callables sharing a name get ``#2``, ``#3``..."""
    named: dict[str, Sink] = {}
    for sink in sinks:
        name = sink_name(sink)
        if name in named and getattr(sink, "name", None):
            continue
        base, n = name, 2
        while name in named:
            name, n = f"{base}#{n}", n + 1
        named[name] = sink
    return named


def overdue_period(
    last_tick_at: datetime | None, expected_every: timedelta, now: datetime, period: timedelta
) -> datetime:
    """The start of the outage period holding ``now``: periods are counted from the moment
    the tick became overdue (twice ``expected_every`` after the last one), so an outage
    gets one alert when it is first seen and one per ``period`` after that, wherever the
    clock's hours fall. With no tick ever, clock-aligned periods."""
    if last_tick_at is None:
        return window_start(now, period)
    overdue_since = last_tick_at + 2 * expected_every
    elapsed = max(0.0, (now - overdue_since).total_seconds())
    size = period.total_seconds()
    return overdue_since + timedelta(seconds=(elapsed // size) * size)


def window_start(when: datetime, window: timedelta) -> datetime:
    """The start of the clock-aligned window holding ``when``."""
    size = window.total_seconds()
    return EPOCH + timedelta(seconds=((when - EPOCH).total_seconds() // size) * size)
