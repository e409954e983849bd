"""Internal: the driver job of every workflow run (type ``tickq.workflow``), and how
``@q.workflow`` registers a workflow.

A driver attempt replays the workflow function from the top over the steps recorded so
far; the first call that needs what is not there yet ends the replay: what it made is
recorded (step jobs enqueued) in one transaction fenced by the driver's attempt, and the
driver suspends (``Suspend``: back to pending, its attempt given back) until a step ends,
a timer is due or an event comes, any of which moves it due again in its own transaction.
The driver gets claims, leases, fencing, retries and alerts from the job machinery.
"""

from __future__ import annotations

from datetime import timedelta

from ..errors import Cancel, Retry, Suspend
from ..job_options import EnqueueOptions, JobOptions
from .context import Blocked, WorkflowContext
from .records import DRIVER_TYPE, Suspension

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from datetime import datetime
    from typing import Any, TypeVar

    from ..context import JobContext
    from ..job import NewJob
    from ..registry import JobDefinition
    from ..runtime import Runtime
    from .definition import WorkflowDefinition
    from .records import Replay

    T = TypeVar("T")

DRIVER_ATTEMPTS = 25
"""Attempts of a driver job: only crashes mid-replay and database errors spend them (a
replay that suspends gives its attempt back); an error in the workflow fails the run."""
RECHECK = timedelta(days=1)
"""A run waiting with no timer (for steps, or an event without timeout) replays at least
this often anyway: a wake is never needed for it to go on, only for it to go on soon."""
MAX_REPLAYS = 50
"""Replays in one driver attempt (each after a wait got a kept event at once)."""
UNKNOWN_WORKFLOW_DELAY = 300.0


def driver_definition(runtime: Runtime) -> JobDefinition:
    """The job definition of ``tickq.workflow``: replays the run whose id is its own."""
    from ..registry import define

    def drive(ctx: JobContext, workflow: str) -> Any:
        definition = runtime.workflows.get(workflow)
        if definition is None:
            known = ", ".join(sorted(runtime.workflows)) or "none"
            raise Retry(UNKNOWN_WORKFLOW_DELAY, f"no workflow {workflow!r} is registered in "
                        f"this process (registered: {known}); import the module defining it "
                        "in the worker")  # fmt: skip
        return replay(runtime, definition, ctx)

    options = JobOptions(name=DRIVER_TYPE, max_attempts=DRIVER_ATTEMPTS, backoff=_never,
                         max_snooze=None)  # fmt: skip
    return define(drive, options)


def _never(attempt: int) -> float | None:
    """A workflow that raised fails at once: replaying it would raise again."""
    return None


def replay(runtime: Runtime, definition: WorkflowDefinition, ctx: JobContext) -> Any:
    """Replay the run until it returns (its result is the driver's) or must wait."""
    store = runtime.store
    owner = ctx.lease_owner or runtime.owner
    for _ in range(MAX_REPLAYS):
        state = _stored(ctx, store.begin_replay, ctx.id)
        if state.run.status == "cancelled":
            raise Cancel(f"workflow run {ctx.id} was cancelled")
        if state.run.status == "done":
            return state.run.result
        wf = WorkflowContext(ctx.id, state.steps, state.now, step_job(runtime))
        try:
            result = definition.fn(wf, **state.run.payload)
        except Blocked as blocked:
            suspension = Suspension("running" if blocked.kind == "job" else "waiting",
                                    due(wf, state))  # fmt: skip
            got = _stored(ctx, store.record_steps, ctx.id, owner, ctx.attempt, wf._new,
                          state.wakes, suspension)  # fmt: skip
            if _recorded(ctx.id, got):
                continue  # a wait got a kept event at once: go on
            raise Suspend(max(0.0, (suspension.due - state.now).total_seconds())) from None
        _recorded(ctx.id, _stored(ctx, store.record_steps, ctx.id, owner, ctx.attempt,
                                  wf._new, 0, None))  # fmt: skip
        return result
    raise Suspend(0.0)


def _stored(ctx: JobContext, call: Callable[..., T], *args: Any) -> T:
    """``call(*args)`` on the store; the database's trouble (down, a deadlock another
    transaction won) is a retry of the driver soon, never the run's failure."""
    from ..trouble import worth_retrying

    try:
        return call(*args)
    except Exception as exc:
        if not worth_retrying(exc):
            raise
        delay = min(60.0, 2.0 ** min(ctx.attempt, 6))
        raise Retry(delay, f"{type(exc).__name__}: {exc}") from exc


def _recorded(run_id: int, got: str | bool) -> bool:
    if got == "cancelled":
        raise Cancel(f"workflow run {run_id} was cancelled")
    if got == "lost":
        raise RuntimeError(f"workflow run {run_id}: this replay lost its lease; another one "
                           "goes on")  # fmt: skip
    return bool(got)


def due(wf: WorkflowContext, state: Replay) -> datetime:
    """When the run must replay at the latest: its first timer, or ``RECHECK`` from now if
    sooner (a backstop: a run goes on without any wake, only later)."""
    timers = [s.wake_at for s in state.steps if s.status == "waiting" and s.wake_at]
    timers += [s.wake_at for s in wf._new if s.status == "waiting" and s.wake_at]
    return min([*timers, state.now + RECHECK])


def step_job(
    runtime: Runtime,
) -> Callable[[str, Mapping[str, Any], Mapping[str, Any], str], NewJob]:
    """How a replay makes a step's job: checked as an enqueue, unique to its run and step."""

    def make(name: str, payload: Mapping[str, Any], meta: Mapping[str, Any], key: str) -> NewJob:
        options = EnqueueOptions(unique_key=key, unique_scope="all")
        return runtime.new_job(name, payload, options, meta)

    return make
