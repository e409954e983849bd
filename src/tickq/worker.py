"""Internal: the always-on driver behind ``tickq worker APP`` and ``q.run_worker()``.

One loop on the calling thread claims batches of due jobs (one per free slot, plus, for
short jobs, as many "ahead" as the slots get through in ~20 ms, to wait in line; every
claimed job is marked until the next round trip records that it started (or its outcome),
so a worker killed holding it spends none of its attempts), hands them to a pool
(threads for sync functions, one event loop for ``async def`` ones), records finished
outcomes in one round trip per batch, and otherwise sleeps until a job is enqueued
(LISTEN/NOTIFY on Postgres, in-process on SQLite), the next pending job comes due, a
schedule slot comes due (it enqueues those itself, as a tick would), a job finishes, or the
poll interval passes.
Everything it does to a job goes through the same store transitions as ``process_jobs``
and ``q.tick()``.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .cycle import new_report, record_and_claim, release, rescue
from .errors import SchemaMissing
from .held import Holdings
from .horizon import look_at_horizon
from .job import BACK_IN_LINE
from .lease import LeaseKeeper
from .listener import Listener
from .logger import log
from .pacing import AHEAD_START_WITHIN, Pacing
from .pool import JobPool
from .pruning import prune_due
from .runtime import watching
from .signals import Flag, handling_signals
from .store import CANCEL_NOTE
from .trouble import Trouble
from .worker_options import (
    check_concurrency,
    check_seconds,
    log_started,
    parse_queues,
    summary,
    where,
)

__all__ = ["Flag", "Trouble", "Worker", "parse_queues", "where"]

if TYPE_CHECKING:
    from .job import Job
    from .runtime import Runtime
    from .store import Outcome


DEFAULT_CONCURRENCY = 10
DEFAULT_GRACE = 25.0
"""Fits under the 30 s most platforms (Kubernetes, Heroku, ECS) allow before SIGKILL."""
DEFAULT_POLL = {"postgres": 5.0, "sqlite": 1.0}
"""Seconds between looks when nothing woke the worker; LISTEN/NOTIFY makes Postgres's long."""
DEFAULT_IDLE_CHECK = 300.0
"""Seconds an idle worker (nothing held, nothing known to come due) sends no query: a
serverless database that suspends after 5 minutes without one can sleep."""
EXTERNAL_STOP_CHECK = 0.5


class Worker:
    """Runs jobs until stopped; see ``Queue.run_worker`` for the options."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        queues: Sequence[str] | str | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        poll_interval: float | None = None,
        grace: float = DEFAULT_GRACE,
        stop: threading.Event | None = None,
        listen_url: str | None = None,
        idle_check: float = DEFAULT_IDLE_CHECK,
    ) -> None:
        self.runtime, self.store = runtime, runtime.store
        self.queues = parse_queues(queues)
        self.concurrency = check_concurrency(concurrency)
        self.listener = Listener(self.store, listen_url, self._enqueued, self._due_later)
        default_poll = DEFAULT_POLL.get(self.store.dialect, 1.0) if self.listens else 1.0
        self.poll_interval = check_seconds(
            "poll_interval", default_poll if poll_interval is None else poll_interval,
            zero_ok=False,
        )  # fmt: skip
        self.grace = check_seconds("grace", grace, zero_ok=True)
        self.idle_check = check_seconds("idle_check", idle_check, zero_ok=False)
        self._poll_given = poll_interval is not None
        # Without LISTEN nothing tells an idle worker of a new job: it looks every poll.
        idle_every = idle_check if self.listens else min(self.poll_interval, idle_check)
        self.pacing = Pacing(runtime.monotonic, self.poll_interval, runtime.lease_seconds,
                             idle_every)  # fmt: skip
        self._asked_expiry = False  # this step already asked when the first lease runs out
        self.report = new_report()
        self._stop = stop or Flag()
        self._external_stop = stop is not None
        self._wake = Flag()  # something happened: look again
        self._due = threading.Event()  # jobs may be due: claim when a slot is free
        self._due.set()
        self._wake_after = 1  # finished jobs that make a batch worth recording at once
        # Every job claimed and not yet recorded or given back: running, waiting in line,
        # finished. The lease keeper and the pool read and mark the same records.
        self.holdings = Holdings()
        self._listening = False
        self._claimed_before = 0  # report["claimed"] at the last step: did jobs flow since?
        self._heard_lock = threading.Lock()
        self._heard_due = float("inf")  # monotonic: a job heard of comes due (not yet paced)
        self._trouble = Trouble("database")
        self._held_since: float | None = None  # outcomes kept since the database failed
        self._rescue_after = 0.0  # monotonic: no rescue before (holders renew first)
        self.keeper = LeaseKeeper(self.store, runtime.owner, runtime.lease_seconds,
                                  self._lease_lost, self.holdings)  # fmt: skip
        self.pool = JobPool(self.concurrency, runtime.registry, self._job_finished,
                            clock=runtime.monotonic, holdings=self.holdings)  # fmt: skip

    # -- running ------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Work until SIGTERM/SIGINT or ``stop``; drain, release, return the totals."""
        self._banner()
        if watching():
            from .observe import queues as watch_queues

            watch_queues(self.store)
        self.store.subscribe(self._enqueued)
        try:
            with handling_signals(self._on_signal):
                self._loop()
                self._drain()
        finally:
            self.listener.stop()
            self.store.unsubscribe(self._enqueued)
            self.keeper.stop()
            self.pool.close()
        log.info("tickq worker stopped: %s", summary(self.report),
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
            self._recovered()
            self.listener.resume()  # the database answered: LISTEN again if it was lost
            self._sleep(self._idle_for())

    def _step(self) -> None:
        self._asked_expiry = False
        self._stop_deaf_listener()
        self._pace_heard()
        self._collect()
        self._abandon_lost()
        if self._trouble.failures:
            self._recover()
        self._unstall()
        if self.runtime.schedules and self.pacing.slots_due():
            self._enqueue_schedules()
        if self.pacing.rescue_due() and not self._holding_off():
            self._rescue()
        self._exchange()
        self._prune()
        self._look_at_horizon()
        if not self._listening:
            # LISTEN once the schema is known to be there: on an unmigrated database the
            # loop's one-line SchemaMissing is the whole story, no trouble from a thread.
            self._listening = True
            self.listener.start()

    def _holding_off(self) -> bool:
        return bool(self._trouble.failures) or time.monotonic() < self._rescue_after

    def _recover(self) -> None:
        """After a database outage, first what this worker holds: renew its leases and
        record the outcomes it kept (each fenced by owner and attempt, whether or not the
        lease ran out meanwhile); raises while the database is still away."""
        self.keeper.renew_now()
        self._exchange(claim=False)

    def _recovered(self) -> None:
        """The database answers again: rescue nobody's jobs for a lease, so that every
        other holder of a lease that ran out meanwhile gets as long to reconnect and renew
        (after an outage they all reconnect at once, and the first must not take the
        others' jobs)."""
        lasted = time.monotonic() - self._trouble.since
        if self._trouble.over() and lasted >= self.runtime.lease_seconds / 3:
            # Long enough for a lease to run out unrenewed (a cut connection is not).
            self._rescue_after = time.monotonic() + self.runtime.lease_seconds

    def _on_trouble(self, exc: Exception) -> None:
        if isinstance(exc, SchemaMissing) and not self._listening:
            raise exc  # a set-up mistake, not an outage: say so and exit
        self._due.set()  # whatever was due still is
        self._stop.wait(self._trouble.happened(exc))

    # -- the steps ----------------------------------------------------------------------
    def _collect(self) -> None:
        """Take the outcomes the pool handed over. A run that lost its lease and was
        replaced by a new claim of the same attempt (a refund gave it back) is stale: its
        outcome must neither be recorded for the new claim nor end its lease."""
        had_unrecorded = bool(self.holdings.unrecorded())
        finished, replaced = self.holdings.collect()
        if not (finished or replaced):
            return
        if not had_unrecorded:
            self.pacing.first_unrecorded()
        self.report["stale"] += len(replaced)
        ran = finished + replaced
        self.pacing.ran([o.duration for o in ran if o.kind != "stale"])
        if any(self.runtime.registry.limited(o.job.type) for o in ran):
            self._due.set()  # a limited type's slot is free: its next job may start

    def _target(self) -> int:
        """Jobs to have in hand: one per slot, plus those worth claiming ahead."""
        return self.concurrency + self.pacing.ahead(self.concurrency)

    def _exchange(self, claim: bool = True) -> None:
        """Record finished jobs and claim up to the target, in one round trip."""
        target = self._target()
        limit = self._claimable(target) if claim else 0
        outcomes = self.holdings.unrecorded()
        if not (claim or outcomes):
            return
        if not (limit or outcomes) or not self._batch_ready(target, outcomes):
            self._wake_after = max(1, self._in_hand() - target // 2)
            return
        self.holdings.stop_timing()  # a job finishing from now on starts the next batch's clock
        if limit:
            self._due.clear()  # before claiming: a wake-up arriving meanwhile is kept
        # Jobs for free slots start at once; the rest wait in line, claimed ahead.
        for_slots = min(limit, max(0, self.concurrency - self._in_hand()))
        began = self.holdings.take_started()  # those finished meanwhile: their outcome says
        self.runtime.declare_limits()
        looked = self.pacing.clock()
        asked = self.holdings.clock()  # real time, as the database counts a rate window
        try:
            held = self._held_for()
            recorded, jobs = record_and_claim(
                self.runtime, self.keeper, outcomes, self.report, for_slots, self.queues,
                ahead=limit - for_slots, started=began, patience=0, held_for=held,
                ahead_wait=AHEAD_START_WITHIN,
            )  # fmt: skip
        except BaseException:
            if outcomes and self._held_since is None:
                self._held_since = time.monotonic()
            # The outcomes stay held: retried until recorded or lost.
            self.holdings.unconfirm(began)  # recorded by a later round trip
            if limit:
                self._due.set()
            raise
        self.keeper.drop(o.job for o in outcomes)
        self._held_since = None
        self.pacing.retry_soon([o.delay for o in outcomes if o.kind in BACK_IN_LINE])
        if any(o.kind == "failed" for o in outcomes):
            # Failure hooks may have enqueued a job due soon (an alert due in group_wait):
            # be there (on SQLite, or with no LISTEN, nothing else tells this worker).
            self.pacing.due_soon(self.store.due_in(self.queues))
        if jobs:
            self.pacing.busy()
        self.keeper.hold(jobs)  # before the pool can start them
        if recorded.ahead:
            self._start_in_time(jobs, recorded.ahead, asked + AHEAD_START_WITHIN)
        self.pool.submit(jobs)
        self._wake_after = max(1, self._in_hand() - target // 2)
        if len(jobs) == limit and limit:
            self._due.set()  # probably more waiting: claim again as soon as a slot frees
        elif limit:
            idle = self._idle()
            self.pacing.looked(looked, self.store.due_in(self.queues), idle)
            if idle:
                self._ask_expiry()

    def _idle(self) -> bool:
        """Nothing held: no job running, waiting in line or waiting to be recorded. Never
        while this process declares limits: a job held back by one becomes claimable when
        another worker's job ends, which nothing announces, so such a worker keeps polling."""
        if any(limit is not None for limit in self.runtime.registry.limits().values()):
            return False
        return not (self._in_hand() or self.holdings.unrecorded() or self.keeper.holding())

    def _ask_expiry(self) -> None:
        """Idle: rescue when another worker's first lease runs out (its holder renews it
        first unless dead), not every few seconds. Learnt at each look: every worker hears
        an enqueue and looks, so one that lost the claim learns the winner's lease."""
        if not self._asked_expiry:
            self._asked_expiry = True
            self.pacing.lease_expires(self.store.lease_expiry_in())

    def _start_in_time(self, jobs: list[Job], ahead: set[int], deadline: float) -> None:
        """Jobs of rate-limited types claimed ahead had their start counted as at
        ``deadline`` (``AHEAD_START_WITHIN`` after the claim was sent): the pool starts
        them by then or hands them back unstarted, so no window holds more starts than the
        limit, however long they wait in line."""
        rated = self.runtime.registry.rate_limited
        late = [j for j in jobs if j.id in ahead and rated(j.type)]
        if late:
            self.holdings.must_start_by(late, deadline)

    def _held_for(self) -> float:
        """Seconds the outcomes in hand have waited for the database (0: none waited)."""
        since = self._held_since
        if self._trouble.failures:  # finished during the outage, not yet sent
            since = min(since if since is not None else self._trouble.since, self._trouble.since)
        return time.monotonic() - since if since is not None else 0.0

    def _in_hand(self) -> int:
        """Jobs handed to the pool whose outcome is not yet collected (running or waiting)."""
        return self.holdings.count_in_hand()

    def _batch_ready(self, target: int, outcomes: list[Outcome]) -> bool:
        in_hand = self._in_hand()
        if not outcomes or not in_hand or self._stop.is_set():
            return True
        return self.pacing.batch_ready(target - in_hand, target)

    def _claimable(self, target: int) -> int:
        if self._stop.is_set():
            return 0
        return self.pacing.claimable(target - self._in_hand(), self._due.is_set())

    def _abandon_lost(self) -> None:
        """Cancel async jobs whose lease is gone (another worker may run them now) and drop
        such jobs still waiting in line; a sync job can't be stopped, so its thread
        finishes and its outcome is ignored."""
        for job in self.holdings.lost_in_hand():
            self.pool.cancel(job)

    def _unstall(self) -> None:
        """Every slot has been busy for a while: give back jobs waiting in line (other
        workers may be idle), and claim none ahead until the pace is measured again."""
        stalled = self.pacing.stalled(self.pool.waiting(), self.pool.last_progress)
        if stalled:
            self.pacing.forget_pace()
            self._release_waiting()
        elif self.holdings.withdrawn():  # a release that failed, or jobs too late to start
            self._give_back_withdrawn()

    def _release_waiting(self) -> None:
        """Put the jobs waiting in line back to pending (they never started); those whose
        release fails stay withdrawn and are released by a later step."""
        self.holdings.withdraw(self.pool.withdraw())
        self._give_back_withdrawn()

    def _give_back_withdrawn(self) -> None:
        unreleased = self.holdings.withdrawn()
        if unreleased:
            release(self.runtime, unreleased, self.report)
            self.keeper.drop(unreleased)

    def _enqueue_schedules(self) -> None:
        """Enqueue the schedule slots that came due, then sleep until the next one. Every
        worker does it at the same moment; each slot is still enqueued once (the cursor
        moves only for the first)."""
        from .tick import enqueue_due

        state = self.store.tick_state()
        enqueue_due(self.runtime, state)
        self._due.set()  # ours or another worker's: the slot's job is due now
        upcoming = min(d.next_slot(state.now) for d in self.runtime.schedules.values())
        self.pacing.slots_enqueued((upcoming - state.now).total_seconds())

    def _rescue(self) -> None:
        before = self.report["rescued"] + self.report["refunded"]
        rescue(self.runtime, self.report)
        idle = self._idle()
        self.pacing.rescued(idle)
        if idle:
            self._ask_expiry()
        if self.report["rescued"] + self.report["refunded"] > before:
            self._due.set()  # back in line (refunded ones too): claim them now

    def _prune(self) -> None:
        """The background duty: batches of finished jobs past their retention, a few ms
        at a time; while behind, the next step comes at once."""
        self.report["pruned"] = self.report.get("pruned", 0) + prune_due(self.runtime, False)
        if self.runtime.prune_not_before == 0.0:  # behind: the next step goes on
            self._wake.set()

    def _look_at_horizon(self) -> None:
        """At most once per ``horizon_every`` while jobs flow (some were claimed since the
        last step): a transaction held open long elsewhere gets its WARNING.
        An idle worker claims nothing, so it never looks."""
        claimed = self.report["claimed"]
        look_at_horizon(self.runtime, claimed > self._claimed_before)
        self._claimed_before = claimed

    def _idle_for(self) -> float:
        if self._stop.is_set():
            return 0.0
        return self.pacing.idle_for(
            unrecorded=bool(self.holdings.unrecorded()), schedules=bool(self.runtime.schedules),
            waiting=self.pool.waiting(), last_progress=self.pool.last_progress,
            free=self._target() - self._in_hand(), due=self._due.is_set(),
        )  # fmt: skip

    def _sleep(self, seconds: float) -> None:
        if self._external_stop:
            seconds = min(seconds, EXTERNAL_STOP_CHECK)
        self._wake.wait(seconds)

    # -- shutting down ------------------------------------------------------------------
    def _drain(self) -> None:
        """Let running jobs finish for up to ``grace`` seconds, then put the rest back."""
        self.listener.stop()
        deadline = time.monotonic() + self.grace  # real time: the platform's kill timer
        try:
            self._release_waiting()  # not started: another worker may as well run them
        except Exception as exc:
            self._trouble.happened(exc)  # tried again on the way out
        while self._holding() and time.monotonic() < deadline:
            self._wake.clear()
            try:
                self._collect()
                self._exchange()
                self._abandon_lost()
            except Exception as exc:
                time.sleep(min(self._trouble.happened(exc), max(0.0, deadline - time.monotonic())))
                continue
            if self._in_hand():
                self._wake.wait(max(0.0, deadline - time.monotonic()))
        self._collect()
        self._give_back()

    def _holding(self) -> bool:
        """Jobs still running or waiting, or outcomes not yet recorded."""
        return bool(self._in_hand() or self.holdings.unrecorded())

    def _give_back(self) -> None:
        self.holdings.withdraw(self.pool.withdraw())  # never started
        running = self.holdings.in_hand()
        leftovers = self.holdings.withdrawn() + running
        # Cut short by the end of the grace: each run gets its ``released`` history row.
        ran = {j.id for j in running}
        for attempt in range(3):
            try:
                self._exchange()
                if leftovers:
                    release(self.runtime, leftovers, self.report, ran, self.grace)
                break
            except Exception as exc:
                if attempt == 2:
                    log.warning(
                        "tickq could not record %d outcome(s) or release %d job(s) before "
                        "exiting (%s); their leases run out within %gs and they run again",
                        len(self.holdings.unrecorded()), len(leftovers), exc,
                        self.runtime.lease_seconds,
                        extra={"event": "release_failed"},
                    )  # fmt: skip
                else:
                    time.sleep(0.5)
        for job in running:
            self.pool.cancel(job)  # async jobs: cancelled; sync ones end with the process

    # -- callbacks from other threads ---------------------------------------------------
    def _job_finished(self, outcome: Outcome) -> None:
        count, timing = self.holdings.finish(outcome)
        # Wake the loop to start timing a batch (unless it already is), or when it is ready.
        if (count == 1 and not timing) or count == self._wake_after:
            self._wake.set()

    def _lease_lost(self, job_ids: set[int]) -> None:
        self._wake.set()

    def _enqueued(self, queues: set[str] | None) -> None:
        if queues is None:
            self.keeper.look_soon()  # anything may have changed: a cancel request too
        elif CANCEL_NOTE in queues:
            self.keeper.look_now()  # a job was asked to stop: maybe one of ours
            queues = queues - {CANCEL_NOTE}
            if not queues:
                return
        if queues is None or self.queues is None or not queues.isdisjoint(self.queues):
            self._due.set()
            self._wake.set()

    def _due_later(self, queue: str, seconds: float) -> None:
        """Another process put a job in line on ``queue`` due in ``seconds`` (a retry, a
        snooze, a delayed enqueue): wake then, not at the next poll."""
        if self.queues is not None and queue not in self.queues:
            return
        at = self.runtime.monotonic() + seconds
        with self._heard_lock:
            if at >= self._heard_due:
                return
            self._heard_due = at
        self._wake.set()  # the loop hands it to the pacing and sleeps until then

    def _pace_heard(self) -> None:
        with self._heard_lock:
            at, self._heard_due = self._heard_due, float("inf")
        if at != float("inf"):
            self.pacing.heard_due(at)

    # -- LISTEN/NOTIFY ------------------------------------------------------------------
    @property
    def listens(self) -> bool:
        return self.listener.listens

    def _stop_deaf_listener(self) -> None:
        """The store found a transaction pooler out only now: LISTEN there hears nothing."""
        if not self.listener.went_deaf():
            return
        if not self._poll_given:
            self.poll_interval = min(self.poll_interval, 1.0)
        self.pacing.poll_every(self.poll_interval)  # idle too: nothing else tells of a job
        log.warning("tickq worker: PostgreSQL is behind a transaction pooler, where LISTEN "
                    "hears nothing; polling every %gs from now on, idle too (give the worker "
                    "a direct connection with listen_url= or TICKQ_LISTEN_URL)",
                    self.poll_interval, extra={"event": "polling",
                                               "look_every": self.poll_interval})  # fmt: skip

    # -- signals and banner -------------------------------------------------------------
    def _on_signal(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        running = self._in_hand() - self.pool.waiting()
        if self._stop.is_set():
            log.warning("tickq worker got %s again: exiting now; the leases of %d running "
                        "job(s) run out within %gs and they run again", name, running,
                        self.runtime.lease_seconds, extra={"event": "worker_killed"})  # fmt: skip
            os._exit(128 + signum)
        self.stop()  # before logging: a second signal may interrupt this handler
        log.info("tickq worker got %s: claiming no more jobs; waiting up to %gs for %d "
                 "running job(s) (send %s again to exit at once)", name, self.grace, running,
                 name, extra={"event": "worker_stopping", "running": running})  # fmt: skip

    def _banner(self) -> None:
        log_started(self.runtime, self.queues, self.concurrency, self._wake_up(),
                    self.poll_interval, self.grace, self.pacing.idle_every)  # fmt: skip

    def _wake_up(self) -> str:
        return self.listener.wake_up()
