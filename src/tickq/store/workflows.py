"""Durable workflows in the database: runs, their recorded steps, and events.

A run is its driver job (same id, type ``tickq.workflow``). Each step job's end is recorded
on its step, and the run woken, by triggers on ``tickq_jobs`` (migration 17), in the
transaction of whichever transition ends the job; what the driver records as it replays is
written here, in one transaction fenced by its attempt, like a job's finish.
"""

from __future__ import annotations

from contextlib import contextmanager
from json import dumps

from ..errors import InvalidTransition
from ..workflow.records import SHOWN_KINDS, Replay, WorkflowRun, WorkflowStep
from .plumbing import Plumbing

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from typing import Any

    from ..job import NewJob
    from ..workflow.records import NewStep, Suspension
    from .plumbing import Rows, Statement

    Run = Callable[[str, dict[str, Any]], Rows]
    """Runs one named query in an open transaction (tickq's own, or the caller's)."""

LOST = "lost"
"""What ``record_steps`` says when the driver no longer holds its attempt (nothing written)."""
NO_STEP = 2**31 - 1
"""Past every step: where a record with no new steps starts them."""
CANCELLED = "cancelled"
"""What ``record_steps`` says when the run was cancelled meanwhile (nothing written)."""


class WorkflowQueries(Plumbing):
    """Start runs, replay and record their steps, deliver events, read and cancel runs."""

    if TYPE_CHECKING:

        def _announce(self, jobs: Sequence[NewJob]) -> None: ...

    @contextmanager
    def _atomic(self) -> Iterator[Run]:
        """One transaction on this thread's connection, its statements run by the yielded
        function (the backend's ``_begin`` opens and commits it)."""
        conn = self._connection()
        with self._errors(), self._begin(conn):
            yield lambda name, params: self._run(conn, self._sql[name], params)

    @contextmanager
    def _begin(self, conn: Any) -> Iterator[None]:
        raise NotImplementedError
        yield

    @contextmanager
    def _on(self, run: Run | None) -> Iterator[Run]:
        """``run`` (the caller's transaction), or a transaction of tickq's own."""
        if run is not None:
            yield run
            return
        with self._atomic() as own:
            yield own

    # -- start and events (in the caller's transaction when it passes one) ---------------
    def start_run(self, driver: NewJob, workflow: str, payload_json: str,
                  run: Run | None = None) -> int:  # fmt: skip
        """Insert the run's driver job and its row; returns the run id (the job's)."""
        with self._on(run) as do:
            run_id = int(do("insert", self._insert_params(driver))[0][0])
            do("wf_insert_run", {"id": run_id, "workflow": workflow, "payload": payload_json,
                                 "now": self._now()})  # fmt: skip
        self._announce([driver])
        return run_id

    def send_event(self, name: str, key: str, data_json: str | None, keep: float,
                   run: Run | None = None) -> tuple[int, list[int]]:  # fmt: skip
        """Keep the event for ``keep`` seconds and deliver it to every run waiting for
        (``name``, ``key``), waking them; returns its id and those runs' ids."""
        now, expires = self._now(), self._in(keep)
        event = {"name": name, "key": key, "now": now}
        with self._on(run) as do:
            do("wf_lock_event", event)
            params = {**event, "data": data_json, "keep": keep, "expires_at": expires}
            event_id = int(do("wf_insert_event", params)[0][0])
            runs = [int(r[0]) for r in do("wf_deliver", {**params, "event": event_id})]
            if runs:
                self._wake_runs(do, runs, now)
        return event_id, runs

    def _wake_runs(self, do: Run, runs: Sequence[int], now: Any) -> None:
        # Locks in one order everywhere: the event's, the steps', the drivers', the runs'
        # (a driver's own finish holds its row, then its trigger takes the run's).
        woken = {"runs": self._ids_param(sorted(runs)), "now": now}
        do("wf_wake_drivers", woken)
        do("wf_wake", woken)

    def prune_workflows(self, cutoff: Any) -> None:
        """Delete the runs (and their steps) that ended before ``cutoff``, and the events
        kept past their time."""
        self._query_many([("wf_prune_steps", {"cutoff": cutoff}),
                          ("wf_prune_runs", {"cutoff": cutoff}),
                          ("wf_forget_events", {"now": self._now()})])  # fmt: skip

    # -- replay --------------------------------------------------------------------------
    def begin_replay(self, run_id: int) -> Replay:
        """End the run's timers that are due, then read it: its wake count first, then its
        steps (a wake in between makes the driver replay once more, never lose it)."""
        params = {"run": run_id, "now": self._now()}
        statements = [("wf_timers_due", params), ("wf_replay_run", params), ("wf_steps", params)]
        _, rows, steps = self._query_many(statements)  # one round trip, one transaction
        if not rows:
            raise LookupError(f"workflow run {run_id} has no row (was it deleted?)")
        now = self._decode_ts(rows[0][10])
        assert now is not None
        run = self._workflow_run(rows[0], [])
        return Replay(run, [self._step(r) for r in steps], now, int(rows[0][6]))

    def record_steps(
        self,
        run_id: int,
        owner: str,
        attempt: int,
        steps: Sequence[NewStep],
        wakes: int,
        suspension: Suspension | None,
    ) -> str | bool:
        """Record ``steps`` (enqueueing step jobs) and, with ``suspension``, the driver's
        due time and the run's status, in one transaction (one round trip) fenced by the
        driver's attempt: each statement checks it, after the first locked the driver's
        row. Returns True when a wait got a kept event at once (replay again), False
        otherwise, or ``LOST`` / ``CANCELLED`` having written nothing."""
        held = {"run": run_id, "owner": owner, "attempt": attempt, "now": self._now()}
        first = steps[0].seq if steps else NO_STEP  # where this record's new steps start
        # The events' locks first, in order: see _wake_runs.
        waits = sorted({(s.name, s.event_key or "") for s in steps if s.kind == "event"})
        statements: list[tuple[str, dict[str, Any]]] = [
            ("wf_lock_event", {"name": name, "key": key}) for name, key in waits
        ]
        statements.append(("wf_fence", held))
        for step in steps:
            statements.extend(self._step_statements(held, step))
        if suspension is not None:
            after = {**held, "first": first, "seen": wakes, "due": self._ts(suspension.due),
                     "status": suspension.status}  # fmt: skip
            statements += [("wf_suspend", after), ("wf_set_status", after)]
        statements.append(("wf_delivered", {"run": run_id, "first": first}))
        results = self._query_many(statements)
        fenced = results[len(waits)]
        if not fenced:
            return LOST
        if fenced[0][0] == "cancelled":
            return CANCELLED
        self._announce([s.job for s in steps if s.job is not None])
        return bool(results[-1][0][0])

    def _step_statements(self, held: dict[str, Any], step: NewStep) -> list[Statement]:
        """The statements recording one step (each checks the fence itself)."""
        row = {**held, "seq": step.seq, "name": step.name}
        if step.job is not None:
            job = {**self._insert_params(step.job, held["now"]), **held}
            return [("wf_insert_step_job", job),
                    ("wf_add_job_step", {**row, "unique_key": step.job.unique_key})]  # fmt: skip
        if step.kind == "event":
            wait = {**row, "key": step.event_key or "", "wake_at": self._ts(step.wake_at)}
            return [("wf_add_event_step", wait)]
        other = {**row, "kind": step.kind, "status": step.status,
                 "wake_at": self._ts(step.wake_at), "result": step.result}  # fmt: skip
        return [("wf_add_step", other)]

    # -- reads and cancel ------------------------------------------------------------------
    def workflow_run(self, run_id: int) -> WorkflowRun | None:
        """The run with this id and its steps (jobs, sleeps, waits), or None."""
        rows = self._query("wf_run", run=run_id)
        if not rows:
            return None
        steps = [self._step(r) for r in self._query("wf_steps", run=run_id)]
        return self._workflow_run(rows[0], [s for s in steps if s.kind in SHOWN_KINDS])

    def workflow_runs(
        self,
        status: str | None = None,
        workflow: str | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[WorkflowRun]:
        """Runs newest first, without their steps; page with ``before_id``."""
        rows = self._query("wf_runs", status=status, workflow=workflow, limit=limit,
                           before_id=before_id)  # fmt: skip
        return [self._workflow_run(r, []) for r in rows]

    def cancel_run(self, run_id: int, error: str) -> None:
        """Cancel a running or waiting run: its driver job and its open step jobs are
        cancelled (asked to stop, if running), its waits closed; one transaction."""
        now = self._now()
        # Locks as a step's finish takes them: its job's row, then the driver's, the run's.
        with self._atomic() as do:
            rows = do("wf_run", {"run": run_id})
            if not rows:
                raise LookupError(f"workflow run {run_id} does not exist")
            if rows[0][2] in ("done", "failed"):
                raise InvalidTransition(
                    f"cannot cancel workflow run {run_id}: it is {rows[0][2]} already"
                )
            self._cancel_open_steps(do, run_id, now)
            do("cancel", {"id": run_id, "now": now})
            do("wf_cancel_run", {"run": run_id, "error": error, "now": now})
        # A replay that recorded steps while that ran (its fence passed first) left their
        # jobs open; none can record after it, so once more finds them all.
        with self._atomic() as do:
            self._cancel_open_steps(do, run_id, now)
        self._query_many([("wf_close_waits", {"run": run_id, "now": now})])

    def _cancel_open_steps(self, do: Run, run_id: int, now: Any) -> None:
        for (job_id,) in do("wf_open_jobs", {"run": run_id}):
            do("cancel", {"id": job_id, "now": now})

    def retry_step(self, run_id: int, seq: int) -> None:
        """A failed run goes on from its failed step ``seq``: the step's job is retried by
        hand (due now), the step is pending again, and the run's driver retried; one
        transaction."""
        now = self._now()
        with self._atomic() as do:
            rows = do("wf_run", {"run": run_id})
            if not rows:
                raise LookupError(f"workflow run {run_id} does not exist")
            if rows[0][2] != "failed":
                raise InvalidTransition(
                    f"cannot retry a step of workflow run {run_id}: it is {rows[0][2]}; only "
                    "a failed run's failed step can be retried (a run that caught the "
                    "failure went on without it)"
                )
            reopened = do("wf_reopen_step", {"run": run_id, "seq": seq})
            if not reopened:
                raise InvalidTransition(
                    f"cannot retry step {seq} of workflow run {run_id}: it is not a job "
                    "step that failed or was cancelled"
                )
            for job_id in (int(reopened[0][0]), run_id):
                if not do("retry", {"id": job_id, "now": now}):
                    raise InvalidTransition(
                        f"cannot retry step {seq} of workflow run {run_id}: job {job_id} is "
                        "no longer failed or cancelled (retried already, or pruned)"
                    )

    # -- rows ----------------------------------------------------------------------------
    def _step(self, r: Sequence[Any]) -> WorkflowStep:
        ts = self._decode_ts
        return WorkflowStep(
            int(r[0]), r[1], r[2], r[3], r[4], r[5], r[6], ts(r[7]), int(r[8] or 0),
            self._lenient_json(r[9]), r[10], ts(r[11]), ts(r[12]),  # type: ignore[arg-type]
        )  # fmt: skip

    def _workflow_run(self, r: Sequence[Any], steps: list[WorkflowStep]) -> WorkflowRun:
        ts = self._decode_ts
        payload = self._lenient_json(r[3])
        return WorkflowRun(
            int(r[0]), r[1], r[2], payload if isinstance(payload, dict) else {},
            self._lenient_json(r[4]), r[5], ts(r[7]), ts(r[8]), ts(r[9]), steps,  # type: ignore[arg-type]
        )  # fmt: skip


def dumps_json(value: Any) -> str:
    """JSON text of a value tickq records for a step (already checked to fit)."""
    return dumps(value, separators=(",", ":"), allow_nan=False)
