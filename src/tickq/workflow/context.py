"""``WorkflowContext``: what a workflow function calls to run steps, sleep and wait.

Each call is numbered in the order the code makes it; on a replay a call already recorded
at its number returns what was recorded (and must ask for the same thing, or the run fails
with ``WorkflowMismatch``); a new one is recorded by the driver, and a call that needs what
is not there yet suspends the run (nothing waits in memory).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ..errors import StepFailed, WorkflowMismatch
from .records import NewStep

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    from ..job import NewJob
    from .records import WorkflowStep

    MakeJob = Callable[[str, "Mapping[str, Any]", "Mapping[str, Any]", str], NewJob]


class Blocked(BaseException):
    """Internal: the replay needs what is not recorded yet (a step's end, a timer, an
    event): the driver records what it made and suspends. A ``BaseException``, so the
    workflow's own ``except Exception`` never swallows it."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


class StepHandle:
    """A step started with ``wf.start``: pass it to ``wf.gather`` for its result."""

    __slots__ = ("_name", "_seq", "_wf")

    def __init__(self, wf: WorkflowContext, seq: int, name: str) -> None:
        self._wf, self._seq, self._name = wf, seq, name

    @property
    def name(self) -> str:
        """The step's job type."""
        return self._name

    @property
    def seq(self) -> int:
        """The step's place in its run (``WorkflowStep.seq``)."""
        return self._seq

    def result(self) -> Any:
        """Wait for this step and return its result (``wf.gather([handle])[0]``)."""
        return self._wf.gather([self])[0]

    def __repr__(self) -> str:
        return f"<tickq step {self.seq} {self.name}>"


class WorkflowContext:
    """The first parameter of a ``@q.workflow`` function: its steps, timers and events.

    The function is replayed from the top each time the run goes on, so it must do the same
    calls in the same order given the same recorded results: anything that varies (the
    time, random numbers, ids, reads of your own tables) goes through a step or
    ``wf.now()`` / ``wf.random()`` / ``wf.uuid()``, which are recorded on first use.
    """

    def __init__(
        self,
        run_id: int,
        steps: Sequence[WorkflowStep],
        now: datetime,
        make_job: MakeJob,
    ) -> None:
        self._run_id = run_id
        self._recorded = list(steps)
        self._now, self._make_job = now, make_job
        self._seq = 0
        self._new: list[NewStep] = []

    @property
    def run_id(self) -> int:
        """The run's id (what ``start`` returned)."""
        return self._run_id

    # -- jobs ----------------------------------------------------------------------------
    def start(self, job: Any, /, **payload: Any) -> StepHandle:
        """Start a step (a ``@q.job`` function, or its type name) with ``payload`` as its
        keyword arguments, without waiting; returns a handle for ``gather``."""
        name = job if isinstance(job, str) else str(getattr(job, "name", job))
        seq, recorded = self._next("job", name)
        if recorded is None:
            meta = {"workflow_run": self.run_id, "workflow_step": seq}
            made = self._make_job(name, payload, meta, f"tickq.workflow:{self.run_id}:{seq}")
            self._new.append(NewStep(seq, "job", name, "pending", job=made))
        return StepHandle(self, seq, name)

    def run(self, job: Any, /, **payload: Any) -> Any:
        """Run a step and return its result; raises ``StepFailed`` if it fails for good."""
        return self.gather([self.start(job, **payload)])[0]

    def gather(self, handles: Sequence[StepHandle]) -> list[Any]:
        """Wait for every step of ``handles``; their results, in order. Once all have
        ended, the first that failed for good raises ``StepFailed``."""
        steps = [self._step(h.seq) for h in handles]
        if any(s is None or s.status == "pending" for s in steps):
            raise Blocked("job")
        for s in steps:
            if s is not None and s.status != "done":
                raise StepFailed(int(s.job_id or 0), s.name, s.error, s.status)
        return [s.result for s in steps if s is not None]

    # -- timers and events -------------------------------------------------------------------
    def sleep(self, duration: timedelta | float) -> None:
        """Suspend the run for ``duration`` (a ``timedelta`` or seconds): a durable timer,
        kept in the database; no worker or tick waits meanwhile."""
        seconds = _seconds("duration", duration)
        seq, recorded = self._next("sleep", "sleep")
        if recorded is None:
            wake = self._now + timedelta(seconds=seconds)
            self._new.append(NewStep(seq, "sleep", "sleep", "waiting", wake_at=wake))
            raise Blocked("sleep")
        if recorded.status == "waiting":
            raise Blocked("sleep")

    def wait_for(
        self, event: str, *, key: str = "", timeout: timedelta | float | None = None
    ) -> Any:
        """Suspend until ``q.send_event(event, key=key, ...)`` and return its data; None
        if ``timeout`` (a ``timedelta`` or seconds; None: no timeout) passes first. An event
        sent before the run gets here is still received, while it is kept."""
        if not isinstance(event, str) or not isinstance(key, str):
            raise TypeError(f"wait_for takes an event name and key as str, got {event!r}, {key!r}")
        seq, recorded = self._next("event", event, key)
        if recorded is None:
            wake = None
            if timeout is not None:
                wake = self._now + timedelta(seconds=_seconds("timeout", timeout))
            self._new.append(NewStep(seq, "event", event, "waiting", event_key=key, wake_at=wake))
            raise Blocked("event")
        if recorded.status == "waiting":
            raise Blocked("event")
        return recorded.result if recorded.status == "done" else None

    # -- values recorded on first use -----------------------------------------------------
    def now(self) -> datetime:
        """The time (aware UTC) when this call first ran; the same on every replay."""
        return datetime.fromisoformat(self._value("now", lambda: self._now.isoformat()))

    def random(self) -> float:
        """A random float in [0, 1), drawn on first execution; the same on every replay."""
        import random

        return float(self._value("random", random.random))

    def uuid(self) -> str:
        """A random UUID (as text), made on first execution; the same on every replay."""
        import uuid

        return str(self._value("uuid", lambda: str(uuid.uuid4())))

    def _value(self, name: str, make: Callable[[], Any]) -> Any:
        seq, recorded = self._next("value", name)
        if recorded is not None:
            return recorded.result
        import json

        value = make()
        self._new.append(NewStep(seq, "value", name, "done", result=json.dumps(value)))
        return value

    # -- bookkeeping ---------------------------------------------------------------------
    def _next(
        self, kind: str, name: str, key: str | None = None
    ) -> tuple[int, WorkflowStep | None]:
        """Number the next call; what is recorded there (checked to be the same call)."""
        seq = self._seq
        self._seq += 1
        if seq >= len(self._recorded):
            return seq, None
        recorded = self._recorded[seq]
        if (recorded.kind, recorded.name, recorded.event_key or None) != (kind, name, key or None):
            raise WorkflowMismatch(self.run_id, seq, _call(recorded.kind, recorded.name,
                                   recorded.event_key), _call(kind, name, key))  # fmt: skip
        return seq, recorded

    def _step(self, seq: int) -> WorkflowStep | None:
        return self._recorded[seq] if seq < len(self._recorded) else None


def _call(kind: str, name: str, key: str | None) -> str:
    """A call in words, as ``WorkflowMismatch`` names it."""
    if kind == "job":
        return f"job {name!r}"
    if kind == "event":
        return f"wait_for({name!r}, key={key or ''!r})"
    return "sleep()" if kind == "sleep" else f"wf.{name}()"


def _seconds(option: str, value: Any) -> float:
    from math import isfinite

    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{option} must be a timedelta or seconds, got {type(value).__name__}")
    if not isfinite(value) or value < 0:
        raise ValueError(f"{option} must be >= 0 seconds, got {value!r}")
    return float(value)
