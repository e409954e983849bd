"""What a workflow run and its steps look like when read back, and a step before
it is recorded. Public as the values ``q.workflow_run`` returns."""

from __future__ import annotations

from datetime import datetime

from ..job import Frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..job import NewJob

DRIVER_TYPE = "tickq.workflow"
"""The job type of every run's driver job (its id is the run's)."""
SHOWN_KINDS = ("job", "sleep", "event")
"""The kinds of step ``WorkflowRun.steps`` lists (recorded values are kept, not listed)."""


class WorkflowStep(Frozen):
    """One recorded call of a workflow run, in execution order (read-only).

    ``kind`` is ``job``, ``sleep`` or ``event``; ``name`` the job type, ``sleep`` or the
    event's name; ``status`` ``pending`` (a job not finished), ``waiting`` (a sleep or a
    wait not over), ``done``, ``failed``, ``cancelled`` or ``timed_out`` (a wait whose
    timeout came first). ``result`` is the job's result or the event's data."""

    __slots__ = ()
    _fields = ("seq", "kind", "name", "status", "job_id", "event_key", "event_id", "wake_at",
               "attempts", "result", "error", "created_at", "finished_at")  # fmt: skip
    _docs = {
        "seq": "Its place in the run: 0, 1, 2... as the code made the calls.",
        "attempts": "The step job's attempts so far (0 for a sleep or an event).",
        "wake_at": "When a sleep ends or a wait times out (None: no timeout).",
        "error": "The step job's last error (while it retries, or once it failed).",
    }

    if TYPE_CHECKING:
        seq: int
        kind: str
        name: str
        status: str
        job_id: int | None
        event_key: str | None
        event_id: int | None
        wake_at: datetime | None
        attempts: int
        result: Any
        error: str | None
        created_at: datetime
        finished_at: datetime | None

    def __new__(
        cls, seq: int, kind: str, name: str, status: str, job_id: int | None,
        event_key: str | None, event_id: int | None, wake_at: datetime | None, attempts: int,
        result: Any, error: str | None, created_at: datetime, finished_at: datetime | None,
    ) -> WorkflowStep:  # fmt: skip
        return tuple.__new__(cls, (seq, kind, name, status, job_id, event_key, event_id,
                                   wake_at, attempts, result, error, created_at,
                                   finished_at))  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (datetimes as ISO-8601 UTC strings)."""
        return _json_ready(self)


class WorkflowRun(Frozen):
    """One run of a workflow, as ``q.workflow_run(run_id)`` reads it (read-only).

    ``status`` is ``running``, ``waiting`` (sleeping or waiting for an event), ``done``,
    ``failed`` or ``cancelled``; ``result`` what the workflow function returned, ``error``
    why it failed; ``steps`` its jobs, sleeps and waits in execution order."""

    __slots__ = ()
    _fields = ("id", "workflow", "status", "payload", "result", "error", "created_at",
               "updated_at", "finished_at", "steps")  # fmt: skip

    if TYPE_CHECKING:
        id: int
        workflow: str
        status: str
        payload: dict[str, Any]
        result: Any
        error: str | None
        created_at: datetime
        updated_at: datetime
        finished_at: datetime | None
        steps: list[WorkflowStep]

    def __new__(
        cls, id: int, workflow: str, status: str, payload: dict[str, Any], result: Any,
        error: str | None, created_at: datetime, updated_at: datetime,
        finished_at: datetime | None, steps: list[WorkflowStep],
    ) -> WorkflowRun:  # fmt: skip
        return tuple.__new__(cls, (id, workflow, status, payload, result, error, created_at,
                                   updated_at, finished_at, steps))  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (datetimes as ISO-8601 UTC strings), steps included."""
        out = _json_ready(self)
        out["steps"] = [s.to_dict() for s in self.steps]
        return out


def _json_ready(record: Frozen) -> dict[str, Any]:
    return {
        name: value.isoformat() if isinstance(value, datetime) else value
        for name, value in zip(record._fields, record, strict=True)
    }


class Replay(Frozen):
    """Internal: what a driver reads before it replays: the run, its steps (all kinds) and
    the time, and the run's wake count (its suspend compares it)."""

    __slots__ = ()
    _fields = ("run", "steps", "now", "wakes")

    if TYPE_CHECKING:
        run: WorkflowRun
        steps: list[WorkflowStep]
        now: datetime
        wakes: int

    def __new__(
        cls, run: WorkflowRun, steps: list[WorkflowStep], now: datetime, wakes: int
    ) -> Replay:
        return tuple.__new__(cls, (run, steps, now, wakes))


class NewStep(Frozen):
    """Internal: a step a replay made that is not recorded yet (its job, for kind job)."""

    __slots__ = ()
    _fields = ("seq", "kind", "name", "status", "job", "event_key", "wake_at", "result")

    if TYPE_CHECKING:
        seq: int
        kind: str
        name: str
        status: str
        job: NewJob | None
        event_key: str | None
        wake_at: datetime | None
        result: str | None

    def __new__(
        cls, seq: int, kind: str, name: str, status: str, job: NewJob | None = None,
        event_key: str | None = None, wake_at: datetime | None = None,
        result: str | None = None,
    ) -> NewStep:  # fmt: skip
        return tuple.__new__(cls, (seq, kind, name, status, job, event_key, wake_at, result))


class Suspension(Frozen):
    """Internal: how a replay that must wait leaves its run: ``status`` (running: waiting
    for jobs; waiting: for a timer or an event) and when to replay at the latest."""

    __slots__ = ()
    _fields = ("status", "due")

    if TYPE_CHECKING:
        status: str
        due: datetime

    def __new__(cls, status: str, due: datetime) -> Suspension:
        return tuple.__new__(cls, (status, due))
