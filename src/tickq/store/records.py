"""The values that cross the store's seam: an attempt's outcome, what ``record`` applied,
what a tick reads first, and a schedule cursor's move."""

from __future__ import annotations

from datetime import datetime

from ..job import OUTCOMES, TRANSITIONS, Frozen, Job, NewJob, Transition

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Literal

    OutcomeKind = Literal[
        "succeeded", "retried", "snoozed", "suspended", "failed", "cancelled", "stale"
    ]


class Outcome(Frozen):
    """What one attempt came to: ``kind`` is one of ``job.OUTCOMES`` (the transition
    ``record`` applies), or ``stale`` for a job handed back without running."""

    __slots__ = ()
    _fields = ("job", "kind", "error", "delay", "duration", "result")
    _docs = {"result": "The job function's return value as JSON text (succeeded only), or None."}

    if TYPE_CHECKING:
        job: Job
        kind: OutcomeKind
        error: str | None
        delay: float
        duration: float
        result: str | None

    def __new__(
        cls, job: Job, kind: OutcomeKind, error: str | None = None, delay: float = 0.0,
        duration: float = 0.0, result: str | None = None,
    ) -> Outcome:  # fmt: skip
        return tuple.__new__(cls, (job, kind, error, delay, duration, result))

    @property
    def transition(self) -> Transition:
        """The row of ``job.STATE_MACHINE`` this outcome applies: the whole decision."""
        return TRANSITIONS[self.kind]


RECORDED_FIELDS = (*OUTCOMES, "stale")
"""The outcomes ``record`` sorts jobs into, named as the cycle's report counts them."""


class Recorded:
    """Which outcomes the store applied; ``stale`` lost their lease before finishing.

    With them, from the same round trip: ``started``, the ids of jobs claimed ahead whose
    start it recorded, and ``ahead``, the ids of the jobs it claimed ahead."""

    __slots__ = ("ahead", "cancelled", "failed", "retried", "snoozed", "stale", "started",
                 "succeeded", "suspended")  # fmt: skip

    def __init__(self) -> None:
        self.succeeded: list[Job] = []
        self.retried: list[Job] = []
        self.snoozed: list[Job] = []
        self.suspended: list[Job] = []
        self.failed: list[Job] = []
        self.cancelled: list[Job] = []
        self.stale: list[Job] = []
        self.started: list[int] = []
        self.ahead: set[int] = set()

    def add(self, other: Recorded) -> None:
        """Take in what another ``record`` applied."""
        for name in RECORDED_FIELDS:
            getattr(self, name).extend(getattr(other, name))
        self.started.extend(other.started)
        self.ahead |= other.ahead

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in RECORDED_FIELDS)
        return f"Recorded({shown})"


class Leases(set[int]):
    """The ids whose leases ``extend_leases`` renewed; ``cancel_requested`` holds those of
    them that ``q.cancel`` asked to stop."""

    def __init__(self, held: Iterable[int], cancel_requested: Iterable[int]) -> None:
        super().__init__(held)
        self.cancel_requested = set(cancel_requested)


class Rescued(list[Job]):
    """The jobs ``rescue_expired`` moved back (or to failed); ``refunded`` holds the ids of
    those whose start was never confirmed, whose attempt was given back."""

    def __init__(self, jobs: list[Job], refunded: list[Job]) -> None:
        super().__init__(refunded + jobs)
        self.refunded = {j.id for j in refunded}


class TickState(Frozen):
    """What a tick reads before it starts: the time, the backlog and schedule cursors."""

    __slots__ = ()
    _fields = ("now", "due", "earliest_pending", "cursors")
    _docs = {
        "due": "Pending jobs due now (outside paused queues), counted up to "
        "``tickq.store.ticks.DUE_COUNT_CAP`` (that many means at least that many).",
        "earliest_pending": "When the next job comes due: the earliest pending ``run_after``"
        " or running job's lease expiry (it comes back then if its worker died).",
        "cursors": "Schedule name -> ``handled_until``: every slot at or before it is enqueued.",
    }

    if TYPE_CHECKING:
        now: datetime
        due: int
        earliest_pending: datetime | None
        cursors: dict[str, datetime]

    def __new__(
        cls, now: datetime, due: int, earliest_pending: datetime | None,
        cursors: dict[str, datetime],
    ) -> TickState:  # fmt: skip
        return tuple.__new__(cls, (now, due, earliest_pending, cursors))


class ScheduleMove(Frozen):
    """Move one schedule's cursor from ``expected`` to ``handled_until`` with its jobs."""

    __slots__ = ()
    _fields = ("name", "expected", "handled_until", "last_slot", "jobs")

    if TYPE_CHECKING:
        name: str
        expected: datetime | None
        handled_until: datetime
        last_slot: datetime | None
        jobs: Sequence[NewJob]

    def __new__(
        cls, name: str, expected: datetime | None, handled_until: datetime,
        last_slot: datetime | None, jobs: Sequence[NewJob],
    ) -> ScheduleMove:  # fmt: skip
        return tuple.__new__(cls, (name, expected, handled_until, last_slot, jobs))
