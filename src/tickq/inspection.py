"""Internal: the ``Queue`` methods that read jobs and ask for manual transitions (a mixin
of the facade): get, list, attempts, retry, cancel, prune, stats."""

from __future__ import annotations

from datetime import timedelta

from .errors import ConfigurationError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .job import Attempt, Job
    from .runtime import Runtime
    from .store import SqlStore


class Inspection:
    """Reads and manual transitions, straight through to the store."""

    __slots__ = ()
    if TYPE_CHECKING:

        @property
        def _store(self) -> SqlStore: ...

        _runtime: Runtime

    def get_job(self, job_id: int) -> Job | None:
        """The job with this id, or None."""
        return self._store.get(job_id)

    def attempts(self, job_id: int) -> list[Attempt]:
        """Every attempt of a job, oldest first: start, end, outcome and error.

        ``outcome`` is ``error``, ``cancelled`` or ``lease_expired`` for attempts that did
        not succeed (``error_type``, ``error_message`` and ``traceback`` split the error),
        ``done`` for the successful one and ``running`` for one in progress. Runs not
        counted as attempts are listed too, before the attempt whose number they share:
        ``snoozed`` (raised ``Snooze``), ``refunded`` (its process vanished before
        confirming the start) and ``released`` (cut short when its worker shut down and
        its grace ran out). None is ever a failure.
        """
        return self._store.attempts(job_id)

    def list_jobs(
        self,
        status: str | None = None,
        type: str | None = None,
        queue: str | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[Job]:
        """Jobs newest first, filtered; page with ``before_id`` = last id seen."""
        return self._store.list_jobs(status, type, queue, limit, before_id)

    def retry(self, job_id: int) -> Job:
        """Put a failed or cancelled job back to pending, due now."""
        return self._store.retry(job_id)

    def retry_failed(
        self,
        type: str | None = None,
        *,
        batch: int = 500,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Put every failed job (of ``type``, when given) back to pending, in batches.

        Returns how many were retried; ``progress(done, total)`` runs after each batch.
        A failed job whose ``unique_key`` an active job holds stays failed.
        """
        if batch < 1:
            raise ConfigurationError(f"batch must be >= 1, got {batch}")
        if type is not None:
            from .job_options import check_text

            check_text("type", type)  # a NUL, say, which no job's type holds
        total, done = self._store.count_failed(type), 0
        while ids := self._store.retry_failed(type, batch):
            done += len(ids)
            if progress is not None:
                progress(done, max(total, done))
        return done

    def cancel(self, job_id: int) -> Job:
        """Cancel a pending job now; ask a running one to stop, from any process.

        A running job stays ``running`` (the returned job's ``cancel_requested_at`` is set)
        until its worker hears the request, within about a second:
        ``JobContext.cancel_requested`` turns True, and an ``async def`` job is cancelled at
        its next ``await``. It then ends ``cancelled``, never retried, if it raises
        anything (``Cancel``, ``CancelledError``, an error); if it returns normally it did
        the work, and succeeds. If its worker died, it ends cancelled when its lease runs
        out. Asking twice changes nothing. Raises ``InvalidTransition`` for a finished job.
        """
        return self._store.cancel(job_id)

    def delete(self, job_id: int) -> None:
        """Delete a done, failed or cancelled job and its attempts, as ``prune`` would:
        processed totals keep counting it. Raises ``InvalidTransition`` for an active job."""
        from .store.browse import delete

        delete(self._store, job_id)

    def prune(
        self,
        older_than: timedelta = timedelta(days=7),
        *,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Delete done, failed and cancelled jobs finished more than ``older_than`` ago.

        Their attempts go with them; processed totals keep counting them. Workflow runs
        that ended as long ago go too, with their steps, and events kept past their ``keep``.
        ``progress(deleted_so_far)`` runs after each batch of 5,000.
        """
        if older_than < timedelta(0):
            raise ConfigurationError(f"older_than must be >= 0, got {older_than}")
        return self._store.prune(older_than, progress=progress)

    def pause(self, queue: str) -> bool:
        """Stop claiming jobs of ``queue`` on every worker and tick, on every machine, until
        ``resume``; enqueueing still works and running jobs finish.

        Returns False when it was already paused. ``tickq pause APP QUEUE`` does the same.
        """
        from .job_options import check_queue

        return self._store.pause(check_queue(queue))

    def resume(self, queue: str) -> bool:
        """Claim ``queue``'s jobs again (listening workers wake at once); returns False when
        it was not paused. ``tickq resume APP QUEUE`` does the same."""
        from .job_options import check_queue

        return self._store.resume(check_queue(queue, bounded=False))

    def paused(self) -> set[str]:
        """The names of the paused queues."""
        return self._store.paused()

    def stats(self) -> dict[str, Any]:
        """What the queue holds and has done, as a JSON-ready dict.

        ``by_status``, ``by_queue`` and ``by_type`` (job counts), ``due`` and
        ``oldest_due_age_seconds``, ``failed_last_hour`` (jobs that reached failed),
        ``failed_attempts_last_hour``, ``processed[queue][type][outcome]`` (every finished
        attempt, pruned ones included; ``snoozed`` counts runs that raised ``Snooze``) and
        ``duration_seconds[queue][type]`` (``count``, ``sum`` and cumulative ``buckets``):
        the same figures ``tickq.metrics`` exports. ``database``: on SQLite the
        write-ahead log's size, its bound and the disk's free space (``wal_bytes``,
        ``wal_bound_bytes``, ``disk_free_bytes``); on Postgres the transactions open longer
        than a minute (``long_transactions``: pid, age_seconds, application_name, state).
        ``retention``: this queue's settings (ages in seconds, None: kept forever) and the
        shared pruning pass (``next_due_at``, ``last_pruned_at``, ``pruned_last_pass``,
        ``behind``: more than a batch was left, the next tick or worker step goes on).

        Every figure is exact and none reads the finished rows: open jobs are counted from
        their partial indexes, done jobs and the processed totals from counters triggers
        keep as jobs move, so a call costs about the same at a million rows as at a
        thousand (docs/performance.md, "At a million rows").
        """
        stats = self._store.stats()
        rule = self._runtime.retention
        stats["retention"] = {"settings": None if rule is None else rule.as_dict(),
                              **self._store.retention_state()}  # fmt: skip
        return stats
