"""Where a worker's jobs run: sync functions on threads, ``async def`` ones on one loop.

Both kinds share the worker's concurrency; each finished job is handed to ``done`` (from
the thread or loop that ran it) as an ``Outcome`` for the worker to record.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from queue import SimpleQueue
from time import perf_counter
from typing import TYPE_CHECKING

from .execute import execute, execute_async, settle
from .job import Job
from .store import Outcome

if TYPE_CHECKING:
    from .queue import JobDefinition, Queue

Done = Callable[[Outcome], None]
Cancel = Callable[[], object]
CLOSE_TIMEOUT = 2.0


class JobPool:
    """Daemon threads (started as needed, up to ``size``) plus one event-loop thread.

    Threads are daemons on purpose: a sync job still running when the worker gives up on
    it (timeout, or shutdown after the grace period) must not keep the process alive.
    """

    def __init__(self, size: int, queue: Queue, done: Done) -> None:
        self.size, self.queue, self.done = size, queue, done
        self._inbox: SimpleQueue[Job | None] = SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._threads: list[threading.Thread] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None

    def submit(self, job: Job) -> Cancel | None:
        """Start ``job``; for an async job, return a function that cancels it."""
        definition = self.queue.definition(job.type)
        if definition is not None and definition.is_async:
            future = asyncio.run_coroutine_threadsafe(self._run_async(job, definition), self.loop)
            return future.cancel
        self._inbox.put(job)
        if not self._idle.acquire(blocking=False) and len(self._threads) < self.size:
            self._spawn()
        return None

    def close(self) -> None:
        """Let idle threads end; cancel what still runs on the loop, then close it. Sync
        jobs still running are abandoned (their threads end with the process)."""
        for _ in self._threads:
            self._inbox.put(None)
        if self._loop is None or self._loop_thread is None:
            return
        asyncio.run_coroutine_threadsafe(_cancel_all_and_stop(), self._loop)
        self._loop_thread.join(CLOSE_TIMEOUT)
        if not self._loop.is_running():
            self._loop.close()

    # -- sync jobs ----------------------------------------------------------------------
    def _spawn(self) -> None:
        name = f"tickq-job-{len(self._threads) + 1}"
        thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _work(self) -> None:
        while (job := self._inbox.get()) is not None:
            self.done(self._run_sync(job))
            self._idle.release()

    def _run_sync(self, job: Job) -> Outcome:
        started = perf_counter()
        definition = self.queue.definition(job.type)
        try:
            return execute(job, definition, self.queue.job_names)
        except BaseException as exc:  # SystemExit & co. from a job end this attempt, not the thread
            return settle(job, definition, exc, started)  # type: ignore[arg-type]

    # -- async jobs ---------------------------------------------------------------------
    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._loop_thread = threading.Thread(
                target=self._loop.run_forever, name="tickq-async", daemon=True
            )
            self._loop_thread.start()
        return self._loop

    async def _run_async(self, job: Job, definition: JobDefinition) -> None:
        started = perf_counter()
        try:
            outcome = await execute_async(job, definition)
        except BaseException as exc:  # cancelled (lease lost, shutdown) or SystemExit & co.
            outcome = settle(job, definition, exc, started)
        self.done(outcome)


async def _cancel_all_and_stop() -> None:
    tasks = asyncio.all_tasks() - {asyncio.current_task()}
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=CLOSE_TIMEOUT / 2)
    asyncio.get_running_loop().stop()
