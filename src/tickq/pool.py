"""Internal: where a worker's jobs run: sync functions on threads, ``async def`` ones on one loop.

Both kinds share the worker's concurrency: at most ``size`` jobs run at once, and jobs
handed over beyond that wait in line. Whoever frees a slot starts the next job in line (a
thread that finished a sync job runs the next sync job itself), so a run of short jobs
needs the worker's own loop only to record them. Each finished job is handed to ``done``
(from the thread or loop that ran it) as an ``Outcome`` for the worker to record.
"""

from __future__ import annotations

import threading
from collections import deque
from queue import SimpleQueue
from time import monotonic, perf_counter

from .execute import execute, execute_async, settle
from .held import Holdings
from .lease import leave_signals_to_main_thread
from .store import Outcome

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Iterable

    from .job import Job
    from .registry import JobDefinition, Registry

    Done = Callable[[Outcome], None]
    Skip = Callable[[Job], bool]
CLOSE_TIMEOUT = 2.0


class JobPool:
    """Daemon threads (started as needed, up to ``size``) plus one event-loop thread.

    Threads are daemons on purpose: a sync job still running when the worker gives up on
    it (timeout, or shutdown after the grace period) must not keep the process alive.
    ``skip(job)`` is asked just before a job that waited in line starts: True (its lease
    was lost meanwhile) and it is handed back as ``Outcome(job, "stale")`` without running.
    ``started(job)`` is told, from the thread or loop about to run it, that a job starts.
    By default both ask and mark the job's ``Held`` record in ``holdings`` (the worker's,
    shared with its lease keeper), where an async job's task is kept too, to cancel it.
    """

    def __init__(
        self,
        size: int,
        registry: Registry,
        done: Done,
        skip: Skip | None = None,
        clock: Callable[[], float] = monotonic,
        started: Callable[[Job], None] | None = None,
        holdings: Holdings | None = None,
    ) -> None:
        self.size, self.registry, self.done, self.clock = size, registry, done, clock
        self.holdings = Holdings() if holdings is None else holdings
        self.skip = skip or self.holdings.is_lost
        self.started = started or self.holdings.start
        self._lock = threading.Lock()
        self._line: deque[Job] = deque()  # handed over, waiting for a free slot
        self._free = size
        self._sync = 0  # sync jobs started and not finished (running, or in the inbox)
        self._inbox: SimpleQueue[Job | None] = SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self.last_progress = self.clock()
        """When a job last finished (or the line was last empty): the worker gives waiting
        jobs back when the slots stay busy for too long."""

    def submit(self, jobs: Iterable[Job]) -> None:
        """Run ``jobs`` in order, as slots free up."""
        with self._lock:
            if not self._line:
                self.last_progress = self.clock()
            self._line.extend(jobs)
        self._start_next()

    def waiting(self) -> int:
        """How many jobs wait in line for a slot."""
        return len(self._line)

    def withdraw(self) -> list[Job]:
        """Take back every job still waiting in line (they will not run)."""
        with self._lock:
            jobs = list(self._line)
            self._line.clear()
        return jobs

    def cancel(self, job: Job) -> bool:
        """Stop ``job``: out of the line if it waits (then handed back as "stale"), cancelled
        if it runs on the loop. A running sync job can't be stopped: False."""
        with self._lock:
            waited = job in self._line
            if waited:
                self._line.remove(job)
        if waited:
            self.done(Outcome(job, "stale"))
            return True
        future = self.holdings.task_of(job)
        return future.cancel() if future is not None else False

    def close(self) -> None:
        """Let idle threads end; cancel what still runs on the loop, then close it. Sync
        jobs still running are abandoned (their threads end with the process)."""
        self.withdraw()
        for _ in self._threads:
            self._inbox.put(None)
        if self._loop is None or self._loop_thread is None:
            return
        import asyncio

        asyncio.run_coroutine_threadsafe(_cancel_all_and_stop(), self._loop)
        self._loop_thread.join(CLOSE_TIMEOUT)
        if not self._loop.is_running():
            self._loop.close()

    # -- taking jobs from the line --------------------------------------------------------
    def _start_next(self) -> None:
        """Start waiting jobs while slots are free."""
        while True:
            with self._lock:
                job = self._next_in_line() if self._free else None
                if job is None:
                    return
                self._free -= 1
            self._start(job)

    def _next_in_line(self) -> Job | None:
        """The next job in line that may still start (under the lock); those past their
        start deadline are withdrawn instead (``Holdings.withdraw_if_late``), unstarted."""
        line, late = self._line, self.holdings.withdraw_if_late
        while line:
            job = line.popleft()
            if not late(job):
                return job
        return None

    def _start(self, job: Job) -> None:
        """Start ``job`` in a slot already taken for it."""
        if self.skip(job):
            self._finished(Outcome(job, "stale"), sync=False)
            return
        definition = self.registry.definition(job.type)
        if definition is not None and definition.is_async:
            self._start_async(job, definition)
            return
        with self._lock:
            self._sync += 1
            spawn = len(self._threads) < self._sync
        if spawn:
            self._spawn()
        self._inbox.put(job)

    def _finished(self, outcome: Outcome, sync: bool) -> Job | None:
        """Free the slot of a finished job; a thread that ran a sync job gets the next job
        in line back when it is a sync job too, to run it itself."""
        self.done(outcome)
        with self._lock:
            self.last_progress = self.clock()
            if sync:
                self._sync -= 1
            job = self._next_in_line()
            if job is None:
                self._free += 1
                return None
            if sync and not self.skip(job) and not self._is_async(job):
                self._sync += 1
                return job
            self._free += 1
            self._line.appendleft(job)
        self._start_next()
        return None

    def _is_async(self, job: Job) -> bool:
        definition = self.registry.definition(job.type)
        return definition is not None and definition.is_async

    # -- sync jobs ----------------------------------------------------------------------
    def _spawn(self) -> None:
        name = f"tickq-job-{len(self._threads) + 1}"
        thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _work(self) -> None:
        leave_signals_to_main_thread()
        job = self._inbox.get()
        while job is not None:
            job = self._finished(self._run_sync(job), sync=True) or self._inbox.get()

    def _run_sync(self, job: Job) -> Outcome:
        self.started(job)
        started = perf_counter()
        definition = self.registry.definition(job.type)
        try:
            return execute(job, definition, self.registry.job_names)
        except BaseException as exc:  # SystemExit & co. from a job end this attempt, not the thread
            return settle(job, definition, exc, started)  # type: ignore[arg-type]

    # -- async jobs ---------------------------------------------------------------------
    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            import asyncio

            self._loop = asyncio.new_event_loop()
            self._loop_thread = threading.Thread(
                target=self._run_loop, name="tickq-async", daemon=True
            )
            self._loop_thread.start()
        return self._loop

    def _run_loop(self) -> None:
        leave_signals_to_main_thread()
        assert self._loop is not None
        self._loop.run_forever()

    def _start_async(self, job: Job, definition: JobDefinition) -> None:
        import asyncio

        with self._lock:  # kept before it can finish, so _run_async can forget it
            future = asyncio.run_coroutine_threadsafe(self._run_async(job, definition), self.loop)
            self.holdings.attach(job, future)

    async def _run_async(self, job: Job, definition: JobDefinition) -> None:
        self.started(job)
        started = perf_counter()
        try:
            outcome = await execute_async(job, definition)
        except BaseException as exc:  # cancelled (lease lost, shutdown) or SystemExit & co.
            outcome = settle(job, definition, exc, started)
        with self._lock:
            self.holdings.attach(job, None)
        self._finished(outcome, sync=False)


async def _cancel_all_and_stop() -> None:
    import asyncio

    tasks = asyncio.all_tasks() - {asyncio.current_task()}
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=CLOSE_TIMEOUT / 2)
    asyncio.get_running_loop().stop()
