"""The always-on driver behind ``tickq worker APP`` and ``q.run_worker()``.

One loop on the calling thread claims batches of due jobs (as many as there are free
slots), hands them to a pool (threads for sync functions, one event loop for ``async def``
ones), records finished outcomes in one round trip per batch, and otherwise sleeps until a
job is enqueued (LISTEN/NOTIFY on Postgres, in-process on SQLite), the next pending job
comes due, a schedule slot comes due (it enqueues those itself, as a tick would), a job
finishes, or the poll interval passes. Everything it does to a job goes through the same
store transitions as ``process_jobs`` and ``q.tick()``.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from queue import Empty, SimpleQueue
from time import monotonic
from typing import TYPE_CHECKING, Any

from .cycle import new_report, record_and_claim, release, rescue
from .errors import ConfigurationError, DatabaseUnavailable, SchemaMissing
from .job import Job
from .lease import LeaseKeeper
from .pool import Cancel, JobPool
from .store import Outcome

if TYPE_CHECKING:
    from .queue import Queue

log = logging.getLogger("tickq")

DEFAULT_CONCURRENCY = 10
DEFAULT_GRACE = 25.0
"""Fits under the 30 s most platforms (Kubernetes, Heroku, ECS) allow before SIGKILL."""
DEFAULT_POLL = {"postgres": 5.0, "sqlite": 1.0}
"""Seconds between looks when nothing woke the worker; LISTEN/NOTIFY makes Postgres's long."""
LOOK_AGAIN = 0.05
"""After a short claim while jobs are due (other workers held the rows): look again soon."""
EXTERNAL_STOP_CHECK = 0.5
BATCH_WAIT = 0.005
"""How long a finished job may wait for others to finish, so they share one round trip."""


@dataclass(slots=True)
class Running:
    job: Job
    cancel: Cancel | None  # async jobs only


class Worker:
    """Runs jobs until stopped; see ``Queue.run_worker`` for the options."""

    def __init__(
        self,
        queue: Queue,
        *,
        queues: Sequence[str] | str | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        poll_interval: float | None = None,
        grace: float = DEFAULT_GRACE,
        stop: threading.Event | None = None,
    ) -> None:
        self.queue, self.store = queue, queue.store
        self.queues = parse_queues(queues)
        self.concurrency = _check_concurrency(concurrency)
        self.poll_interval = _check_seconds(
            "poll_interval", DEFAULT_POLL.get(self.store.dialect, 1.0)
            if poll_interval is None else poll_interval, zero_ok=False,
        )  # fmt: skip
        self.grace = _check_seconds("grace", grace, zero_ok=True)
        self.rescue_every = min(queue.lease_seconds / 4, self.poll_interval)
        self.report = new_report()
        self._stop = stop or threading.Event()
        self._external_stop = stop is not None
        self._wake = threading.Event()  # something happened: look again
        self._due = threading.Event()  # jobs may be due: claim when a slot is free
        self._due.set()
        self._finished: SimpleQueue[Outcome] = SimpleQueue()
        self._running: dict[tuple[int, int], Running] = {}
        self._unrecorded: list[Outcome] = []
        self._unrecorded_since = 0.0
        self._next_poll = self._next_rescue = self._next_slot = 0.0
        self._started = False
        self._trouble = Trouble("database")
        self._listen_trouble = Trouble("LISTEN connection")
        self._listener_stop = threading.Event()
        self.keeper = LeaseKeeper(self.store, queue.owner, queue.lease_seconds, self._lease_lost)
        self.pool = JobPool(self.concurrency, queue, self._job_finished)

    # -- running ------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Work until SIGTERM/SIGINT or ``stop``; drain, release, return the totals."""
        self._banner()
        self.store.subscribe(self._enqueued)
        self._start_listener()
        try:
            with self._signals():
                self._loop()
                self._drain()
        finally:
            self._listener_stop.set()
            self.store.unsubscribe(self._enqueued)
            self.keeper.stop()
            self.pool.close()
        log.info("tickq worker stopped: %s", _summary(self.report),
                 extra={"event": "worker_stopped", **self.report})  # fmt: skip
        return dict(self.report)

    def stop(self) -> None:
        """Stop claiming and shut down gracefully (what the first SIGTERM does)."""
        self._stop.set()
        self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            try:
                self._step()
            except Exception as exc:
                self._on_trouble(exc)
                continue
            self._trouble.over()
            self._sleep(self._idle_for())

    def _step(self) -> None:
        self._collect()
        self._abandon_lost()
        if self.queue.schedules and monotonic() >= self._next_slot:
            self._enqueue_schedules()
        if monotonic() >= self._next_rescue:
            self._rescue()
        self._exchange()
        self._started = True

    def _on_trouble(self, exc: Exception) -> None:
        if isinstance(exc, SchemaMissing) and not self._started:
            raise exc  # a set-up mistake, not an outage: say so and exit
        self._due.set()  # whatever was due still is
        self._stop.wait(self._trouble.happened(exc))

    # -- the steps ----------------------------------------------------------------------
    def _collect(self) -> None:
        while True:
            try:
                outcome = self._finished.get_nowait()
            except Empty:
                return
            if self._running.pop((outcome.job.id, outcome.job.attempts), None) is not None:
                if not self._unrecorded:
                    self._unrecorded_since = monotonic()
                self._unrecorded.append(outcome)

    def _exchange(self) -> None:
        """Record finished jobs and claim one per free slot, in one round trip."""
        limit = self._claimable()
        if not (limit or self._unrecorded) or not self._batch_ready():
            return
        outcomes, self._unrecorded = self._unrecorded, []
        if limit:
            self._due.clear()  # before claiming: a wake-up arriving meanwhile is kept
        looked = monotonic()
        try:
            _, jobs = record_and_claim(
                self.queue, self.keeper, outcomes, self.report, limit, self.queues
            )
        except BaseException:
            self._unrecorded = outcomes + self._unrecorded  # retried until recorded or lost
            if limit:
                self._due.set()
            raise
        self.keeper.drop(o.job for o in outcomes)
        self._retry_soon(outcomes)
        self.keeper.hold(jobs)
        for job in jobs:
            self._running[(job.id, job.attempts)] = Running(job, self.pool.submit(job))
        if len(jobs) == limit and limit:
            self._due.set()  # probably more waiting: claim again as soon as a slot frees
        elif limit:
            self._next_poll = looked + self._until_due()

    def _batch_ready(self) -> bool:
        """Jobs started together tend to finish together: wait (briefly) until half the
        slots are free, so their outcomes and the next claim share one round trip."""
        if not self._unrecorded or not self._running or self._stop.is_set():
            return True
        free = self.concurrency - len(self._running)
        return free * 2 >= self.concurrency or self._batch_deadline() <= monotonic()

    def _batch_deadline(self) -> float:
        return self._unrecorded_since + BATCH_WAIT

    def _claimable(self) -> int:
        free = self.concurrency - len(self._running)
        if free <= 0 or self._stop.is_set():
            return 0
        if not self._due.is_set() and monotonic() < self._next_poll:
            return 0
        return free

    def _retry_soon(self, outcomes: list[Outcome]) -> None:
        delays = [o.delay for o in outcomes if o.kind == "retry_later"]
        if delays:
            self._next_poll = min(self._next_poll, monotonic() + min(delays))

    def _abandon_lost(self) -> None:
        """Cancel async jobs whose lease is gone (another worker may run them now); a sync
        job can't be stopped, so its thread finishes and its outcome is ignored."""
        lost = self.keeper.lost()
        for (job_id, _), running in self._running.items():
            if job_id in lost and running.cancel is not None:
                running.cancel()
                running.cancel = None

    def _enqueue_schedules(self) -> None:
        """Enqueue the schedule slots that came due, then sleep until the next one. Every
        worker does it at the same moment; each slot is still enqueued once (the cursor
        moves only for the first)."""
        from .tick import enqueue_due

        state = self.store.tick_state()
        enqueue_due(self.queue, state)
        self._due.set()  # ours or another worker's: the slot's job is due now
        upcoming = min(d.next_slot(state.now) for d in self.queue.schedules.values())
        self._next_slot = monotonic() + max(0.0, (upcoming - state.now).total_seconds())

    def _rescue(self) -> None:
        before = self.report["rescued"]
        rescue(self.queue, self.report)
        self._next_rescue = monotonic() + self.rescue_every
        if self.report["rescued"] > before:
            self._due.set()

    def _until_due(self) -> float:
        due_in = self.store.due_in(self.queues)
        if due_in is None:
            return self.poll_interval
        return min(self.poll_interval, max(due_in, LOOK_AGAIN))

    def _idle_for(self) -> float:
        if self._unrecorded:
            return max(0.0, self._batch_deadline() - monotonic())
        deadlines = [self._next_rescue]
        if self.queue.schedules:
            deadlines.append(self._next_slot)
        if len(self._running) < self.concurrency:
            if self._due.is_set():
                return 0.0
            deadlines.append(self._next_poll)
        return max(0.0, min(deadlines) - monotonic())

    def _sleep(self, seconds: float) -> None:
        if self._external_stop:
            seconds = min(seconds, EXTERNAL_STOP_CHECK)
        self._wake.wait(seconds)

    # -- shutting down ------------------------------------------------------------------
    def _drain(self) -> None:
        """Let running jobs finish for up to ``grace`` seconds, then put the rest back."""
        self._listener_stop.set()
        deadline = monotonic() + self.grace
        while (self._running or self._unrecorded) and monotonic() < deadline:
            self._wake.clear()
            try:
                self._collect()
                self._exchange()
                self._abandon_lost()
            except Exception as exc:
                time.sleep(min(self._trouble.happened(exc), max(0.0, deadline - monotonic())))
                continue
            if self._running:
                self._wake.wait(max(0.0, deadline - monotonic()))
        self._collect()
        self._give_back()

    def _give_back(self) -> None:
        leftovers = [r.job for r in self._running.values()]
        for attempt in range(3):
            try:
                self._exchange()
                if leftovers:
                    release(self.queue, leftovers, self.report)
                break
            except Exception as exc:
                if attempt == 2:
                    log.warning(
                        "tickq could not record %d outcome(s) or release %d job(s) before "
                        "exiting (%s); their leases run out within %gs and they run again",
                        len(self._unrecorded), len(leftovers), exc, self.queue.lease_seconds,
                        extra={"event": "release_failed"},
                    )  # fmt: skip
                else:
                    time.sleep(0.5)
        for running in self._running.values():
            if running.cancel is not None:
                running.cancel()

    # -- callbacks from other threads ---------------------------------------------------
    def _job_finished(self, outcome: Outcome) -> None:
        self._finished.put(outcome)
        self._wake.set()

    def _lease_lost(self, job_ids: set[int]) -> None:
        self._wake.set()

    def _enqueued(self, queues: set[str] | None) -> None:
        if queues is None or self.queues is None or not queues.isdisjoint(self.queues):
            self._due.set()
            self._wake.set()

    # -- LISTEN/NOTIFY ------------------------------------------------------------------
    def _start_listener(self) -> None:
        if self.store.can_listen:
            threading.Thread(target=self._listen, name="tickq-listen", daemon=True).start()

    def _listen(self) -> None:
        while not self._listener_stop.is_set():
            try:
                self.store.listen(self._listening, self._listener_stop)
            except Exception as exc:
                self._listener_stop.wait(self._listen_trouble.happened(exc))

    def _listening(self, queues: set[str] | None) -> None:
        # (Re)connected: anything enqueued meanwhile was not heard, so look (_enqueued).
        if queues is None and not self._listen_trouble.over():
            log.info("tickq worker listening for enqueues (LISTEN/NOTIFY)",
                         extra={"event": "listening"})  # fmt: skip
        self._enqueued(queues)

    # -- signals and banner -------------------------------------------------------------
    @contextmanager
    def _signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # signals reach the main thread only; stop with ``stop=``
            return
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _on_signal(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        running = len(self._running)
        again = self._stop.is_set()
        self.stop()  # before logging: a second signal may interrupt this handler
        if again:
            log.warning("tickq worker got %s again: exiting now; the leases of %d running "
                        "job(s) run out within %gs and they run again", name, running,
                        self.queue.lease_seconds, extra={"event": "worker_killed"})  # fmt: skip
            os._exit(128 + signum)
        log.info("tickq worker got %s: claiming no more jobs; waiting up to %gs for %d "
                 "running job(s) (send %s again to exit at once)", name, self.grace, running,
                 name, extra={"event": "worker_stopping", "running": running})  # fmt: skip

    def _banner(self) -> None:
        from . import __version__

        queues = ",".join(self.queues) if self.queues else "all"
        wake = "LISTEN/NOTIFY" if self.store.can_listen else "in-process enqueues"
        log.info(
            "tickq %s worker %s started: backend %s %s, queues %s, concurrency %d, wake-up on "
            "%s, poll every %gs, lease %gs, grace %gs, %d schedule(s)", __version__,
            self.queue.owner, self.store.dialect, where(self.store.url), queues,
            self.concurrency, wake, self.poll_interval, self.queue.lease_seconds, self.grace,
            len(self.queue.schedules),
            extra={"event": "worker_started", "version": __version__,
                   "owner": self.queue.owner, "backend": self.store.dialect,
                   "queues": list(self.queues or []), "concurrency": self.concurrency,
                   "poll_interval": self.poll_interval, "lease_seconds": self.queue.lease_seconds,
                   "grace": self.grace, "schedules": sorted(self.queue.schedules),
                   "pid": os.getpid()},
        )  # fmt: skip


class Trouble:
    """Capped, jittered exponential backoff while something keeps failing; logs each try."""

    FIRST, CAP = 0.5, 30.0

    def __init__(self, what: str) -> None:
        self.what = what
        self.failures = 0
        self.since = 0.0

    def happened(self, exc: Exception) -> float:
        """Log ``exc``; return how long to wait before trying again."""
        if not self.failures:
            self.since = monotonic()
        self.failures += 1
        delay = min(self.CAP, self.FIRST * 2 ** (self.failures - 1))
        delay *= random.uniform(0.8, 1.2)  # workers that lost the database together spread out
        extra = {"event": f"{self.what.split()[0].lower()}_unavailable", "failures": self.failures}
        if isinstance(exc, DatabaseUnavailable):
            log.warning("tickq %s trouble (try %d): %s; retrying in %.1fs", self.what,
                        self.failures, exc, delay, extra=extra)  # fmt: skip
        else:
            log.exception("tickq %s trouble (try %d): unexpected %s; retrying in %.1fs",
                          self.what, self.failures, type(exc).__name__, delay,
                          extra=extra)  # fmt: skip
        return delay

    def over(self) -> bool:
        """Note success; True (and a log line) when it ends a run of failures."""
        if not self.failures:
            return False
        log.info("tickq %s reachable again after %d failed tries over %.1fs", self.what,
                 self.failures, monotonic() - self.since,
                 extra={"event": f"{self.what.split()[0].lower()}_recovered"})  # fmt: skip
        self.failures = 0
        return True


def parse_queues(queues: Sequence[str] | str | None) -> tuple[str, ...] | None:
    """``"a,b"`` or ``["a", "b"]`` -> ``("a", "b")``; None or empty -> every queue."""
    if queues is None:
        return None
    names: Iterable[str] = queues.split(",") if isinstance(queues, str) else queues
    parsed = tuple(n.strip() for n in names)
    if not parsed or any(not n for n in parsed):
        raise ConfigurationError(
            f"queues must be non-empty names separated by commas, e.g. 'default,emails'; "
            f"got {queues!r}"
        )
    return parsed


def where(url: str) -> str:
    """The database's location without credentials or options."""
    return url.split("@")[-1].split("?")[0].split("://")[-1]


def _summary(report: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in report.items())


def _check_concurrency(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"concurrency must be a whole number >= 1, got {value!r}")
    return value


def _check_seconds(name: str, value: float, zero_ok: bool) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or value < 0
        or (value == 0 and not zero_ok)
    ):
        limit = ">= 0" if zero_ok else "> 0"
        raise ConfigurationError(f"{name} must be seconds {limit}, got {value!r}")
    return float(value)
