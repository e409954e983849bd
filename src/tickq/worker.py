"""The always-on driver behind ``tickq worker APP`` and ``q.run_worker()``.

One loop on the calling thread claims batches of due jobs (as many as there are free slots,
never more: a job is claimed only to start at once), hands them to a pool (threads for sync
functions, one event loop for ``async def`` ones), records finished outcomes in one round
trip per batch, and otherwise sleeps until a job is enqueued (LISTEN/NOTIFY on Postgres,
in-process on SQLite), the next pending job comes due, a schedule slot comes due (it
enqueues those itself, as a tick would), a job finishes, or the poll interval passes.
Everything it does to a job goes through the same store transitions as ``process_jobs``
and ``q.tick()``.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from time import monotonic
from typing import TYPE_CHECKING, Any

from .cycle import new_report, record_and_claim, release, rescue
from .errors import ConfigurationError, DatabaseUnavailable, SchemaMissing
from .lease import LeaseKeeper, leave_signals_to_main_thread
from .logger import log
from .pool import JobPool

if TYPE_CHECKING:
    from .job import Job
    from .queue import Queue
    from .store import Outcome


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
STALL = 1.0
"""Jobs waiting in line are given back when no slot has freed up for this many seconds."""


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
        listen_url: str | None = None,
    ) -> None:
        self.queue, self.store = queue, queue.store
        self.queues = parse_queues(queues)
        self.concurrency = _check_concurrency(concurrency)
        self.listen_url = listen_url or os.environ.get("TICKQ_LISTEN_URL") or None
        self.listens = self.store.can_listen and bool(
            self.listen_url or not self.store.transaction_pooled
        )
        if self.listen_url and self.store.can_listen:
            self.listen_url = self.store.direct_url(self.listen_url)
        default_poll = DEFAULT_POLL.get(self.store.dialect, 1.0) if self.listens else 1.0
        self.poll_interval = _check_seconds(
            "poll_interval", default_poll if poll_interval is None else poll_interval,
            zero_ok=False,
        )  # fmt: skip
        self.grace = _check_seconds("grace", grace, zero_ok=True)
        self._poll_given = poll_interval is not None
        self.rescue_every = min(queue.lease_seconds / 4, self.poll_interval)
        self.report = new_report()
        self._stop = stop or Flag()
        self._external_stop = stop is not None
        self._wake = Flag()  # something happened: look again
        self._due = threading.Event()  # jobs may be due: claim when a slot is free
        self._due.set()
        self._finish_lock = threading.Lock()
        self._finished: list[Outcome] = []  # handed over by the pool, not yet collected
        self._wake_after = 1  # finished jobs that make a batch worth recording at once
        self._timing = False  # outcomes wait to be recorded: the loop wakes by BATCH_WAIT
        self._running: dict[int, Job] = {}  # id(job) -> job handed to the pool (may wait)
        self._unrecorded: list[Outcome] = []
        self._unrecorded_since = 0.0
        self._unreleased: list[Job] = []  # claimed ahead, given back, release not yet done
        self._next_poll = self._next_rescue = self._next_slot = 0.0
        self._started = False
        self._trouble = Trouble("database")
        self._listen_trouble = Trouble("LISTEN connection")
        self._listener_stop = threading.Event()
        self.keeper = LeaseKeeper(self.store, queue.owner, queue.lease_seconds, self._lease_lost)
        self.pool = JobPool(self.concurrency, queue, self._job_finished, self.keeper.is_lost)

    # -- running ------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Work until SIGTERM/SIGINT or ``stop``; drain, release, return the totals."""
        self._banner()
        self.store.subscribe(self._enqueued)
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
        self._stop_deaf_listener()
        self._collect()
        self._abandon_lost()
        self._unstall()
        if self.queue.schedules and monotonic() >= self._next_slot:
            self._enqueue_schedules()
        if monotonic() >= self._next_rescue:
            self._rescue()
        self._exchange()
        if not self._started:
            # LISTEN once the schema is known to be there: on an unmigrated database the
            # loop's one-line SchemaMissing is the whole story, no trouble from a thread.
            self._started = True
            self._start_listener()

    def _on_trouble(self, exc: Exception) -> None:
        if isinstance(exc, SchemaMissing) and not self._started:
            raise exc  # a set-up mistake, not an outage: say so and exit
        self._due.set()  # whatever was due still is
        self._stop.wait(self._trouble.happened(exc))

    # -- the steps ----------------------------------------------------------------------
    def _collect(self) -> None:
        with self._finish_lock:
            finished, self._finished = self._finished, []
            self._timing = bool(finished or self._unrecorded)
        if not finished:
            return
        if not self._unrecorded:
            self._unrecorded_since = monotonic()
        for outcome in finished:
            if self._running.pop(id(outcome.job), None) is not None:
                self._unrecorded.append(outcome)

    def _target(self) -> int:
        """Jobs to have in hand: one per slot. None is claimed ahead to wait in line: a
        worker killed holding such jobs would spend an attempt of each though none ran."""
        return self.concurrency

    def _exchange(self) -> None:
        """Record finished jobs and claim up to the target, in one round trip."""
        target = self._target()
        limit = self._claimable(target)
        if not (limit or self._unrecorded) or not self._batch_ready(target):
            self._wake_after = max(1, len(self._running) - target // 2)
            return
        outcomes, self._unrecorded = self._unrecorded, []
        with self._finish_lock:
            self._timing = False  # a job finishing from now on starts the next batch's clock
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
            self._running[id(job)] = job
        self.pool.submit(jobs)
        self._wake_after = max(1, len(self._running) - target // 2)
        if len(jobs) == limit and limit:
            self._due.set()  # probably more waiting: claim again as soon as a slot frees
        elif limit:
            self._next_poll = looked + self._until_due()

    def _batch_ready(self, target: int) -> bool:
        """Jobs started together tend to finish together: wait (briefly) until half the
        target is free, so their outcomes and the next claim share one round trip."""
        if not self._unrecorded or not self._running or self._stop.is_set():
            return True
        free = target - len(self._running)
        return free * 2 >= target or self._batch_deadline() <= monotonic()

    def _batch_deadline(self) -> float:
        return self._unrecorded_since + BATCH_WAIT

    def _claimable(self, target: int) -> int:
        free = target - len(self._running)
        if free <= 0 or self._stop.is_set():
            return 0
        if not self._due.is_set() and monotonic() < self._next_poll:
            return 0
        return free

    def _retry_soon(self, outcomes: list[Outcome]) -> None:
        delays = [o.delay for o in outcomes if o.kind == "retry_later"]
        if delays:
            self._next_poll = min(self._next_poll, monotonic() + min(delays))
        if any(o.kind == "fail" for o in outcomes):
            # Failure hooks may have enqueued a job due soon (an alert due in group_wait):
            # be there; no NOTIFY is sent for a job due later.
            self._next_poll = min(self._next_poll, monotonic() + self._until_due())

    def _abandon_lost(self) -> None:
        """Cancel async jobs whose lease is gone (another worker may run them now) and drop
        such jobs still waiting in line; a sync job can't be stopped, so its thread
        finishes and its outcome is ignored."""
        lost = self.keeper.lost()
        if lost:
            for job in [j for j in self._running.values() if j.id in lost]:
                self.pool.cancel(job)

    def _unstall(self) -> None:
        """Every slot has been busy for a while: give back jobs waiting in line (other
        workers may be idle)."""
        stalled = self.pool.waiting() and monotonic() - self.pool.last_progress > STALL
        if stalled or self._unreleased:
            self._release_waiting()

    def _release_waiting(self) -> None:
        """Put the jobs waiting in line back to pending (they never started)."""
        for job in self.pool.withdraw():
            self._running.pop(id(job), None)
            self._unreleased.append(job)
        if self._unreleased:
            release(self.queue, self._unreleased, self.report)
            self.keeper.drop(self._unreleased)
            self._unreleased = []

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
        if self._stop.is_set():
            return 0.0
        if self._unrecorded:
            return max(0.0, self._batch_deadline() - monotonic())
        deadlines = [self._next_rescue]
        if self.queue.schedules:
            deadlines.append(self._next_slot)
        if self.pool.waiting():
            deadlines.append(self.pool.last_progress + STALL)
        if len(self._running) < self._target():
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
        try:
            self._release_waiting()  # not started: another worker may as well run them
        except Exception as exc:
            self._trouble.happened(exc)  # tried again on the way out
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
        leftovers = self._unreleased + list(self._running.values())
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
        for job in list(self._running.values()):
            self.pool.cancel(job)  # async jobs: cancelled; sync ones end with the process

    # -- callbacks from other threads ---------------------------------------------------
    def _job_finished(self, outcome: Outcome) -> None:
        with self._finish_lock:
            self._finished.append(outcome)
            count, timing = len(self._finished), self._timing
        # Wake the loop to start timing a batch (unless it already is), or when it is ready.
        if (count == 1 and not timing) or count == self._wake_after:
            self._wake.set()

    def _lease_lost(self, job_ids: set[int]) -> None:
        self._wake.set()

    def _enqueued(self, queues: set[str] | None) -> None:
        if queues is None or self.queues is None or not queues.isdisjoint(self.queues):
            self._due.set()
            self._wake.set()

    # -- LISTEN/NOTIFY ------------------------------------------------------------------
    def _start_listener(self) -> None:
        if self.listens:
            threading.Thread(target=self._listen, name="tickq-listen", daemon=True).start()

    def _listen(self) -> None:
        leave_signals_to_main_thread()
        while not self._listener_stop.is_set():
            try:
                self.store.listen(self._listening, self._listener_stop, self.listen_url)
            except Exception as exc:
                self._listener_stop.wait(self._listen_trouble.happened(exc))

    def _stop_deaf_listener(self) -> None:
        """The store found a transaction pooler out only now: LISTEN there hears nothing."""
        if not (self.listens and not self.listen_url and self.store.transaction_pooled):
            return
        self.listens = False
        self._listener_stop.set()
        if not self._poll_given:
            self.poll_interval = min(self.poll_interval, 1.0)
            self.rescue_every = min(self.rescue_every, self.poll_interval)
        log.warning("tickq worker: PostgreSQL is behind a transaction pooler, where LISTEN "
                    "hears nothing; polling every %gs from now on (give the worker a direct "
                    "connection with listen_url= or TICKQ_LISTEN_URL)", self.poll_interval,
                    extra={"event": "polling"})  # fmt: skip

    def _listening(self, queues: set[str] | None) -> None:
        # (Re)connected: anything enqueued meanwhile was not heard, so look (_enqueued).
        if queues is None and not self._listen_trouble.over():
            log.info("tickq worker listening for enqueues (%s)", self._wake_up(),
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
        running = len(self._running) - self.pool.waiting()
        if self._stop.is_set():
            log.warning("tickq worker got %s again: exiting now; the leases of %d running "
                        "job(s) run out within %gs and they run again", name, running,
                        self.queue.lease_seconds, extra={"event": "worker_killed"})  # fmt: skip
            os._exit(128 + signum)
        self.stop()  # before logging: a second signal may interrupt this handler
        log.info("tickq worker got %s: claiming no more jobs; waiting up to %gs for %d "
                 "running job(s) (send %s again to exit at once)", name, self.grace, running,
                 name, extra={"event": "worker_stopping", "running": running})  # fmt: skip

    def _banner(self) -> None:
        from . import __version__

        queues = ",".join(self.queues) if self.queues else "all"
        wake = self._wake_up()
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
                   "pid": os.getpid(), "wake_up": wake},
        )  # fmt: skip

    def _wake_up(self) -> str:
        """How the worker hears of new jobs, in words for the start line."""
        if not self.store.can_listen:
            return "in-process enqueues"
        if self.store.dialect == "sqlite":
            return "commits to the file (watched; PRAGMA data_version)"
        if self.listen_url:
            return f"LISTEN/NOTIFY on a direct connection to {where(self.listen_url)}"
        if not self.listens:
            return (
                "polling only (behind a transaction pooler LISTEN hears nothing; give the "
                "worker a direct connection with listen_url= or TICKQ_LISTEN_URL)"
            )
        return "LISTEN/NOTIFY"


class Flag:
    """``threading.Event`` on a re-entrant lock: the signal handler sets the worker's flags
    while the main thread it interrupted may be inside one of their methods, holding the
    lock (a plain Event would deadlock there)."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.RLock())
        self._flag = False

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        with self._cond:
            self._flag = True
            self._cond.notify_all()

    def clear(self) -> None:
        with self._cond:
            self._flag = False

    def wait(self, timeout: float | None = None) -> bool:
        with self._cond:
            if not self._flag:
                self._cond.wait(timeout)
            return self._flag


class Trouble:
    """Capped, jittered exponential backoff while something keeps failing.

    The cap is short on purpose: a try against a database that is down costs a refused
    connection, while every second of the cap can be a second of lag after it is back
    (a 30 s cap left a worker idle ~9 s after a 20 s outage). Logs the first tries, then
    every ``LOG_EVERY``-th, so a long outage doesn't flood the log.
    """

    FIRST, CAP = 0.25, 1.5
    LOG_EVERY = 20

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
        if self.failures > 3 and self.failures % self.LOG_EVERY:
            return delay
        if isinstance(exc, (DatabaseUnavailable, SchemaMissing)):
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
