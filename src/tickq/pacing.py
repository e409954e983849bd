"""Internal: when the worker looks, claims, records and sleeps — decisions only, no I/O.

``Pacing`` reads time from the clock it is given (``clock.monotonic`` of the queue's clock),
so its rules are tested with a ``FrozenClock`` instead of sleeping. The worker tells it
what happened (a look, a rescue, a schedule pass, a retry) and asks it what to do next.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

LOOK_AGAIN = 0.05
"""After a short claim while jobs are due (other workers held the rows): look again soon."""
BATCH_WAIT = 0.005
"""How long a finished job may wait for others to finish, so they share one round trip."""
STALL = 1.0
"""Jobs waiting in line are given back when no slot has freed up for this many seconds."""
PREFETCH_WINDOW = 0.02
"""Claim ahead as many jobs as the slots get through in this many seconds at the recent
pace, so short jobs don't each wait for a round trip; jobs slower than this get none (they
would only wait in line while another worker sits idle)."""
MAX_PREFETCH = 100
AHEAD_START_WITHIN = 0.1
"""A job of a rate-limited type claimed ahead starts within this many seconds of its
claim, or is given back unstarted: its start is counted as at that time (a few times the
line's ``PREFETCH_WINDOW``, so it is rarely late)."""
RESCUE_MARGIN = 0.05
"""An idle worker rescues this long after the first lease it knows of runs out."""


class Pacing:
    """The worker's timetable: next poll, next rescue, next schedule slot, batch timing."""

    def __init__(
        self,
        clock: Callable[[], float],
        poll_interval: float,
        lease_seconds: float,
        idle_check: float | None = None,
    ) -> None:
        self.clock = clock
        self.poll_interval = poll_interval
        self.rescue_every = min(lease_seconds / 4, poll_interval)
        self.idle_every = poll_interval if idle_check is None else idle_check
        """Seconds between looks with nothing held and nothing known to come due."""
        self.next_poll = self.next_rescue = self.next_slot = 0.0
        self.next_heard = float("inf")
        """When a job another process put in line comes due (heard, not yet looked for)."""
        self.unrecorded_since = 0.0
        self.pace: float | None = None
        """Recent seconds per job (a moving average); None: not measured (claim none ahead)."""

    def poll_every(self, seconds: float) -> None:
        """Poll (and rescue) at least every ``seconds`` from now on."""
        self.poll_interval = seconds
        self.rescue_every = min(self.rescue_every, seconds)
        self.idle_every = min(self.idle_every, seconds)

    # -- what happened ------------------------------------------------------------------
    def rescued(self, idle: bool = False) -> None:
        """A rescue pass ran; ``idle``: nothing held, so the next waits for ``idle_every``
        (or the first lease known to run out, see ``lease_expires``)."""
        self.next_rescue = self.clock() + (self.idle_every if idle else self.rescue_every)

    def lease_expires(self, expires_in: float | None) -> None:
        """Idle, the first lease of a running job runs out in ``expires_in`` s (None:
        nothing runs): rescue then, or after ``idle_every`` if that is sooner."""
        now = self.clock()
        self.next_rescue = now + self.idle_every
        if expires_in is not None:
            at = now + max(0.0, expires_in) + RESCUE_MARGIN
            self.next_rescue = min(self.next_rescue, at)

    def busy(self) -> None:
        """Jobs were claimed: rescue and poll at the busy pace again."""
        now = self.clock()
        self.next_rescue = min(self.next_rescue, now + self.rescue_every)
        self.next_poll = min(self.next_poll, now + self.poll_interval)

    def slots_enqueued(self, next_slot_in: float) -> None:
        """Schedule slots were enqueued; the next one comes due in ``next_slot_in`` s."""
        self.next_slot = self.clock() + max(0.0, next_slot_in)

    def looked(self, at: float, due_in: float | None, idle: bool = False) -> None:
        """A claim at ``at`` found fewer jobs than asked; the next is due in ``due_in`` s;
        ``idle``: nothing is held, so the next look waits for ``idle_every`` at most."""
        every = self.idle_every if idle else self.poll_interval
        wait = every if due_in is None else min(every, max(due_in, LOOK_AGAIN))
        self.next_poll = at + wait
        if self.next_heard <= at:
            self.next_heard = float("inf")  # heard before this look began: it saw the job

    def due_soon(self, due_in: float | None) -> None:
        """A job may have come due sooner than the next look: look when it is due."""
        if due_in is not None:
            self.next_poll = min(self.next_poll, self.clock() + max(due_in, LOOK_AGAIN))

    def heard_due(self, at: float) -> None:
        """Another process put a job in line due at ``at`` (this clock): look then, however
        long the poll interval (kept apart from ``next_poll``, which each look resets)."""
        self.next_heard = min(self.next_heard, at)

    def retry_soon(self, delays: list[float]) -> None:
        """Jobs retry after ``delays``: look again when the first comes due."""
        if delays:
            self.next_poll = min(self.next_poll, self.clock() + min(delays))

    def ran(self, durations: list[float]) -> None:
        """Jobs ran for ``durations`` seconds: the pace moves towards their mean."""
        if durations:
            mean = sum(durations) / len(durations)
            self.pace = mean if self.pace is None else 0.7 * self.pace + 0.3 * mean

    def forget_pace(self) -> None:
        """The slots stalled: claim none ahead until the pace is measured again."""
        self.pace = None

    def first_unrecorded(self) -> None:
        """An outcome now waits to be recorded: its batch's clock starts."""
        self.unrecorded_since = self.clock()

    # -- what to do ---------------------------------------------------------------------
    def rescue_due(self) -> bool:
        return self.clock() >= self.next_rescue

    def slots_due(self) -> bool:
        return self.clock() >= self.next_slot

    def stalled(self, waiting: int, last_progress: float) -> bool:
        """Jobs wait in line and no slot has freed up for ``STALL`` seconds."""
        return bool(waiting) and self.clock() - last_progress > STALL

    def ahead(self, concurrency: int) -> int:
        """How many jobs to claim ahead of ``concurrency`` slots: what they get through in
        ``PREFETCH_WINDOW`` at the recent pace (at most ``MAX_PREFETCH``)."""
        if self.pace is None:
            return 0
        return int(min(MAX_PREFETCH, PREFETCH_WINDOW * concurrency / max(self.pace, 1e-6)))

    def claimable(self, free: int, due: bool) -> int:
        """How many jobs to claim with ``free`` slots: none until something may be due."""
        if free <= 0 or not (due or self.clock() >= min(self.next_poll, self.next_heard)):
            return 0
        return free

    def batch_ready(self, free: int, target: int) -> bool:
        """Jobs started together tend to finish together: record once half the target is
        free, or once the first outcome has waited ``BATCH_WAIT``."""
        return free * 2 >= target or self.batch_deadline() <= self.clock()

    def batch_deadline(self) -> float:
        return self.unrecorded_since + BATCH_WAIT

    def idle_for(
        self,
        *,
        unrecorded: bool,
        schedules: bool,
        waiting: int,
        last_progress: float,
        free: int,
        due: bool,
    ) -> float:
        """How long the worker may sleep before something needs doing."""
        now = self.clock()
        if unrecorded:
            return max(0.0, self.batch_deadline() - now)
        deadlines = [self.next_rescue]
        if schedules:
            deadlines.append(self.next_slot)
        if waiting:
            deadlines.append(last_progress + STALL)
        if free > 0:
            if due:
                return 0.0
            deadlines.append(min(self.next_poll, self.next_heard))
        return max(0.0, min(deadlines) - now)
