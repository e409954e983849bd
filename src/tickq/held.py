"""Internal: the jobs this process holds, one ``Held`` record each, in one ``Holdings``.

A job is held from its claim until its outcome is recorded or it is given back: waiting in
the worker's line, running, or finished with its outcome on the way to the database. The
worker, its lease keeper and its pool (or a cycle and the process's keeper) all read and
mark the same record, found by the job's id and attempt, under one lock. No method calls
out while holding it: they return what the caller then acts on (renew, log, cancel).
"""

from __future__ import annotations

import threading
from itertools import count
from time import monotonic

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from concurrent.futures import Future

    from .job import Job
    from .store import Outcome

    Key = tuple[int, int]


def key_of(job: Job) -> Key:
    """A held job's identity: its id and the attempt this process claimed."""
    return job.id, job.attempts


class Held:
    """One claimed attempt of a job, from its claim until it is dropped."""

    __slots__ = ("asked", "collected", "confirmed", "job", "key", "lease_until", "lost",
                 "order", "outcome", "recording", "replaced", "since", "start_by", "started",
                 "task", "withdrawn")  # fmt: skip

    def __init__(self, job: Job, now: float, lease_until: float, started: bool) -> None:
        self.job = job
        self.key: Key = (job.id, job.attempts)  # see key_of
        self.since = now  # monotonic: when it was claimed (cancel checks wait a while)
        self.lease_until = lease_until  # monotonic: its lease runs out, unless renewed
        self.started = started  # it runs (or ran)
        self.confirmed = False  # its start is recorded (a round trip or a renewal sent it)
        self.asked = False  # told to stop (a cancel request)
        self.lost = False  # the database says it is no longer ours
        self.recording = False  # its outcome goes to the database: a gone lease is its to judge
        self.outcome: Outcome | None = None  # what its run came to, once it ended
        self.order = 0  # when its outcome came, among the others
        self.collected = False  # the worker's loop took its outcome, to record it
        self.withdrawn = False  # taken out of the line, never started: to give back
        self.task: Future[None] | None = None  # an async run, to cancel
        self.replaced: Held | None = None  # the run of this attempt this claim replaced
        # monotonic: not started after this (a rate-limited job claimed ahead, its start
        # counted then): given back instead; None: no such deadline.
        self.start_by: float | None = None

    @property
    def in_hand(self) -> bool:
        """Handed to the pool, its outcome not yet taken by the worker's loop."""
        return not (self.collected or self.withdrawn)


class Holdings:
    """Every ``Held`` record of one worker (or of one process's cycles), keyed by job id
    and attempt. A claim of an attempt still held (a refund gave it back, and this process
    claimed the job again) replaces the old record, which hangs on as ``replaced`` until
    its run ends: that late outcome is stale, never the new claim's."""

    def __init__(self, clock: Callable[[], float] = monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._held: dict[Key, Held] = {}
        self._order = count(1)
        # Counts kept with the records, so that the worker's loop need not scan them for
        # each question it asks several times per round trip.
        self._uncollected = 0  # outcomes handed over and not yet collected (or dropped)
        self._in_hand = 0
        self._collected = 0
        self._withdrawn = 0
        self._arrived: list[Held] = []  # outcomes handed over since the last collect
        self._recording: dict[Key, Held] = {}  # collected, not yet dropped: to record
        # Records lost, and records replacing an older run still going: while there are
        # none, no held run is lost (is_lost and recording need not look each one up).
        self._odd = 0
        self.timing = False  # the worker times a batch of outcomes (it wakes by itself)

    def __len__(self) -> int:
        return len(self._held)

    def __bool__(self) -> bool:
        return bool(self._held)

    def get(self, job: Job) -> Held | None:
        """The record of ``job``'s run (None once dropped, or for another attempt)."""
        top = held = self._held.get((job.id, job.attempts))
        if top is not None and top.job is job:
            return top
        while held is not None and held.job is not job:
            held = held.replaced
        return top if held is None and top is not None and top.job == job else held

    # -- claim and drop -----------------------------------------------------------------
    def add(self, jobs: Iterable[Job], lease_seconds: float, started: bool = False) -> None:
        """Hold ``jobs`` (claimed now); ``started``: they run at once."""
        now = self.clock()
        until = now + lease_seconds
        records = self._held
        with self._lock:
            for job in jobs:
                held = Held(job, now, until, started)
                key = held.key
                old = records.get(key)
                if old is not None:
                    self._forget(old)
                    if old.job is not job:
                        held.replaced = old if old.in_hand else old.replaced
                        self._odd += held.replaced is not None
                records[key] = held
                self._in_hand += 1

    def drop(self, jobs: Iterable[Job]) -> list[Job]:
        """Forget ``jobs``' records; returns the jobs whose record was the one held for
        their attempt. The record of a newer claim of the same attempt (the job gave its
        attempt back, by a snooze, a suspended workflow or a refund, and another thread of
        this process claimed it again) is left alone: only the old run is unlinked."""
        dropped = []
        records = self._held
        with self._lock:
            for job in jobs:
                held = self.get(job)
                if held is None:
                    continue
                top = records[held.key]
                if held is top:
                    del records[held.key]
                    self._forget(held)
                    dropped.append(job)
                    continue
                while top.replaced is not held:  # held is in top's chain (see get)
                    top = top.replaced  # type: ignore[assignment]
                top.replaced = held.replaced
                self._odd -= top is records[held.key] and top.replaced is None
        return dropped

    def _forget(self, held: Held) -> None:
        """``held`` leaves the records (dropped, or replaced by a new claim)."""
        self._count(held, -1)
        self._odd -= held.lost + (held.replaced is not None)
        if held.collected:
            self._recording.pop(held.key, None)

    def _count(self, held: Held, sign: int) -> None:
        if held.collected or held.withdrawn:
            self._collected += sign * held.collected
            self._withdrawn += sign * held.withdrawn
        else:
            self._in_hand += sign

    # -- what the pool tells --------------------------------------------------------------
    def start(self, job: Job) -> None:
        """``job``'s run begins: its start is sent with the next round trip or renewal."""
        with self._lock:
            held = self.get(job)
            if held is not None:
                held.started = True

    def attach(self, job: Job, task: Future[None] | None) -> None:
        """The async task running ``job`` (None: it ended)."""
        with self._lock:
            held = self.get(job)
            if held is not None:
                held.task = task

    def task_of(self, job: Job) -> Future[None] | None:
        with self._lock:
            held = self.get(job)
            return None if held is None else held.task

    def finish(self, outcome: Outcome) -> tuple[int, bool]:
        """``outcome`` came (from any thread); returns how many wait to be collected and
        whether the worker already times a batch."""
        with self._lock:
            held = self.get(outcome.job)
            if held is not None and held.outcome is None:
                held.outcome, held.order = outcome, next(self._order)
                self._arrived.append(held)
                self._uncollected += 1
            return self._uncollected, self.timing

    def is_lost(self, job: Job) -> bool:
        """True once ``job``'s run is known to be no longer ours (cheap: no lock)."""
        if not self._odd:
            return False
        held = self.get(job)
        return held is not None and (held.lost or held is not self._held.get(held.key))

    # -- what the worker's loop does ------------------------------------------------------
    def collect(self) -> tuple[list[Outcome], list[Outcome]]:
        """Take the outcomes handed over since the last call, in the order they came: those
        to record, and the stale ones of runs a newer claim replaced."""
        with self._lock:
            if not self._uncollected:
                self.timing = bool(self._collected)
                return [], []
            records, arrived, self._arrived = self._held, self._arrived, []
            fresh = [h for h in arrived if records.get(h.key) is h and not h.collected]
            stale = self._take_stale() if self._odd else []
            for held in fresh:
                self._count(held, -1)
                held.collected = True
                self._count(held, +1)
                self._recording[held.key] = held
            self._uncollected = 0
            self.timing = bool(fresh or stale or self._collected)
        stale.sort(key=_order)
        return _outcomes(fresh), _outcomes(stale)

    def _take_stale(self) -> list[Held]:
        """The ended runs that newer claims replaced, unlinked from them."""
        stale = []
        for held in self._held.values():
            if _ended(held.replaced):
                stale.append(held.replaced)
                held.replaced = held.replaced.replaced  # type: ignore[union-attr]
                self._odd -= held.replaced is None
        return stale  # type: ignore[return-value]

    def unrecorded(self) -> list[Outcome]:
        """The collected outcomes not yet recorded (the worker drops each once recorded)."""
        with self._lock:
            if not self._recording:
                return []
            return _outcomes(self._recording.values())

    def in_hand(self) -> list[Job]:
        """The jobs handed to the pool whose outcome is not yet collected."""
        with self._lock:
            return [h.job for h in self._held.values() if h.in_hand]

    def count_in_hand(self) -> int:
        """``len(in_hand())`` without the lock: a signal handler asks it on the thread that
        may hold the lock, and only that thread (the worker's loop) changes the count."""
        return self._in_hand

    def lost_in_hand(self) -> list[Job]:
        """Jobs in hand whose lease is gone, and runs a newer claim replaced."""
        with self._lock:
            lost = [h.job for h in self._held.values() if h.lost and h.in_hand]
            return lost + [h.job for h in self._replaced() if h.in_hand]

    def withdraw(self, jobs: Iterable[Job]) -> None:
        """``jobs`` were taken out of the line unstarted: to give back."""
        with self._lock:
            for job in jobs:
                held = self.get(job)
                if held is not None and held is self._held[held.key]:
                    self._count(held, -1)
                    held.withdrawn = True
                    self._count(held, +1)

    def must_start_by(self, jobs: Iterable[Job], deadline: float) -> None:
        """``jobs`` (claimed ahead) start by ``deadline`` (this clock), or not at all."""
        with self._lock:
            for job in jobs:
                held = self.get(job)
                if held is not None:
                    held.start_by = deadline

    def withdraw_if_late(self, job: Job) -> bool:
        """True, and ``job`` withdrawn (to give back), when its start deadline has passed
        (see ``must_start_by``): the pool asks just before it starts a job that waited."""
        with self._lock:
            held = self.get(job)
            if held is None or held.start_by is None or self.clock() <= held.start_by:
                return False
            if held is self._held.get(held.key) and held.in_hand:
                self._count(held, -1)
                held.withdrawn = True
                self._count(held, +1)
            return True

    def withdrawn(self) -> list[Job]:
        with self._lock:
            if not self._withdrawn:
                return []
            return [h.job for h in self._held.values() if h.withdrawn]

    def stop_timing(self) -> None:
        with self._lock:
            self.timing = False

    def take_started(self) -> list[Job]:
        """Jobs in hand that started, their start not yet sent: marked sent."""
        with self._lock:
            began = [h for h in self._held.values() if h.started and not h.confirmed
                     and h.in_hand]  # fmt: skip
            for held in began:
                held.confirmed = True
        return [h.job for h in began]

    def unconfirm(self, jobs: Iterable[Job]) -> None:
        """The round trip that was to record these jobs' start failed: send it again."""
        with self._lock:
            for job in jobs:
                held = self.get(job)
                if held is not None:
                    held.confirmed = False

    # -- what the lease keeper does -------------------------------------------------------
    def to_renew(self) -> tuple[dict[int, Held], list[int]]:
        """The records whose lease to renew, by job id, and the ids whose start to send."""
        with self._lock:
            renew = {h.job.id: h for h in self._held.values() if not h.lost}
            began = [i for i, h in renew.items() if h.started and not h.confirmed]
        return renew, began

    def renewed(
        self, renew: dict[int, Held], owned: Iterable[int], began: Iterable[int], until: float
    ) -> list[Held]:
        """The database renewed the leases of ``owned`` (until ``until``) and recorded the
        start of ``began``; returns the newly lost (still held, not being recorded)."""
        owned, lost = set(owned), []
        with self._lock:
            for job_id in began:
                renew[job_id].confirmed = True
            for job_id, held in renew.items():
                if self._held.get(held.key) is not held:
                    continue  # dropped meanwhile
                if job_id in owned:
                    held.lease_until = until
                elif not held.recording:
                    self._odd += not held.lost
                    held.lost = True
                    lost.append(held)
        return lost

    def to_look_at(self, settled: float) -> dict[int, Held]:
        """Records held since ``settled`` or before, neither lost nor asked to stop yet."""
        with self._lock:
            return {h.job.id: h for h in self._held.values()
                    if h.since <= settled and not (h.lost or h.asked)}  # fmt: skip

    def ask(self, records: Iterable[Held]) -> list[Job]:
        """Mark ``records`` asked to stop; returns the jobs not asked before (still held)."""
        asked = []
        with self._lock:
            for held in records:
                if self._held.get(held.key) is held and not held.asked:
                    held.asked = True
                    asked.append(held.job)
        return asked

    def recording(self, jobs: Iterable[Job]) -> set[int]:
        """The outcomes of ``jobs`` go to the database now; returns the ids of those whose
        run is no longer ours (see ``is_lost``): theirs are stale."""
        lost = set()
        with self._lock:
            for job in jobs:
                held = self.get(job)
                if held is not None:
                    held.recording = True
                    if self._odd and (held.lost or held is not self._held.get(held.key)):
                        lost.add(job.id)
        return lost

    def lost_ids(self) -> set[int]:
        with self._lock:
            return {h.job.id for h in self._held.values() if h.lost}

    def _replaced(self) -> Iterator[Held]:
        for held in self._held.values():
            if held.replaced is not None:
                yield held.replaced


def _ended(held: Held | None) -> bool:
    return held is not None and held.outcome is not None


def _order(held: Held) -> int:
    return held.order


def _outcomes(records: Iterable[Held]) -> list[Outcome]:
    """The outcomes of ``records``, which are in the order they came (collect takes them as
    they arrived, and keeps them so)."""
    return [h.outcome for h in records if h.outcome is not None]
