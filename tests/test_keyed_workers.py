"""Limits per key with real ``tickq worker`` processes: with ``concurrency=1`` per key, no
two jobs of one key ever run at once across three workers of eight slots, while the keys
run side by side; a rate limit per key holds across workers; a killed worker's key slot
comes back when its lease runs out, and other keys never wait for it. Checked from the
jobs' own ledger (start and end times) and from the database, sampled during the run."""

from __future__ import annotations

import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from test_controls_workers import POLL, most_at_once, stop, workers
from tickq import JobContext, Queue
from workerproc import eventually, runs

KEYS = ("acme", "globex", "initech", "umbrella", "hooli")


def keyed_queue(db_url: str) -> Queue:
    """The web app's side: it registers the keyed types (so enqueue computes each job's
    key) with the options the workers' app (apps/controls_app.py) gives them; it never
    claims, so it declares nothing."""
    q = Queue(db_url)
    q.migrate()

    @q.job(concurrency=1, concurrency_key="account")
    def per_account(
        ctx: JobContext, account: str, seconds: float = 0.05, hang_first: bool = False
    ) -> None: ...

    @q.job(rate_limit="3/s", concurrency_key=lambda payload: f"acct-{payload['account']}")
    def rated_per_account(ctx: JobContext, account: int) -> None: ...

    return q


def spans_by_key(runs_dir: Path, job_type: str) -> dict[str, list[tuple[float, float]]]:
    notes = [n for n in runs(runs_dir) if n["type"] == job_type]
    starts = {n["id"]: n for n in notes if n["event"] == "start"}
    ends = {n["id"]: n["at"] for n in notes if n["event"] == "end"}
    assert starts.keys() == ends.keys()
    found: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for job_id, start in starts.items():
        found[start["key"]].append((start["at"], ends[job_id]))
    return found


class RunningSampler:
    """Reads, every few milliseconds until stopped, how many jobs of each key the database
    holds as running (with a live lease): the most it ever saw, per key and in all."""

    def __init__(self, q: Queue, job_type: str) -> None:
        self.q, self.job_type = q, job_type
        self.most: dict[str, int] = defaultdict(int)
        self.most_keys = self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RunningSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            running = [j for j in self.q.list_jobs("running", type=self.job_type, limit=1000)]
            counts: dict[str, int] = defaultdict(int)
            for job in running:
                counts[job.payload["account"]] += 1
            for key, n in counts.items():
                self.most[key] = max(self.most[key], n)
            self.most_keys = max(self.most_keys, len(counts))
            self.samples += 1


def done_of(q: Queue, job_type: str) -> int:
    return len(q.list_jobs("done", type=job_type, limit=1000))


def three_workers(db_url: str, tmp_path: Path, slots: int = 8) -> list[Any]:
    """Three workers of ``slots`` slots, each on its own queue: a key's jobs are spread over
    the three queues, so all three claim every key, and only the limit, checked in the
    database, keeps a key to one running job between them."""
    args = ("--concurrency", str(slots), "--poll-interval", POLL)
    return [w for i in (1, 2, 3) for w in workers(1, db_url, tmp_path, "--queues", f"q{i}", *args)]


def run_five_keys_of_twenty(
    q: Queue, start_workers: Callable[[], list[Any]], runs_dir: Path, done: Callable[[], int]
) -> RunningSampler:
    """5 keys x 20 jobs of ``per_account`` (0.05 s each), enqueued interleaved, run by the
    workers ``start_workers`` starts; returns what the database sampler saw."""
    procs = start_workers()
    with RunningSampler(q, "per_account") as sampler:
        try:
            q.enqueue_many([("per_account", {"account": k, "seconds": 0.05},
                             {"queue": f"q{(n + i) % 3 + 1}"})
                            for n in range(20) for i, k in enumerate(KEYS)])  # fmt: skip
            eventually(lambda: done() == 100, timeout=90, what="100 per-account jobs done")
        finally:
            stop(procs)
    return sampler


def assert_one_per_key_and_keys_in_parallel(runs_dir: Path, sampler: RunningSampler) -> None:
    by_key = spans_by_key(runs_dir, "per_account")
    assert sorted(by_key) == sorted(KEYS) and all(len(s) == 20 for s in by_key.values())
    for key, spans in by_key.items():
        assert most_at_once(spans) == 1, f"two jobs of {key} ran at once"
    everything = [span for spans in by_key.values() for span in spans]
    assert most_at_once(everything) == len(KEYS), "the keys did not all run side by side"
    # 20 jobs of 0.05 s per key, one at a time: about a second if the keys progress in
    # parallel, five if one key's backlog held up the others.
    first, last = min(s for s, _ in everything), max(e for _, e in everything)
    assert last - first < 4.0, f"took {last - first:.1f}s"
    assert sampler.samples > 10
    assert max(sampler.most.values()) == 1, dict(sampler.most)
    assert sampler.most_keys >= 3, "the database never held several keys running"
    assert len({n["pid"] for n in runs(runs_dir)}) == 3, "every worker ran some"


@pytest.mark.timeout(150)
def test_one_per_key_across_three_workers_of_8_slots_and_keys_run_side_by_side(
    db_url: str, tmp_path: Path
) -> None:
    q = keyed_queue(db_url)
    sampler = run_five_keys_of_twenty(
        q, lambda: three_workers(db_url, tmp_path), tmp_path,
        lambda: done_of(q, "per_account"),
    )  # fmt: skip
    assert_one_per_key_and_keys_in_parallel(tmp_path, sampler)
    assert all(j.attempts == 1 for j in q.list_jobs("done", limit=100))


def run_rated_per_account(q: Queue, start_workers: Callable[[], list[Any]], runs_dir: Path) -> None:
    """18 jobs of ``rated_per_account`` (3 starts a second per key), 2 keys spread over the
    queues q1-q3, run by the workers ``start_workers`` starts; checks each key's window from
    the jobs' claim times (the database's) and that the keys' windows are their own."""
    ids = q.enqueue_many([("rated_per_account", {"account": n % 2}, {"queue": f"q{n % 3 + 1}"})
                          for n in range(18)])  # fmt: skip
    procs = start_workers()
    try:
        eventually(lambda: done_of(q, "rated_per_account") == 18, timeout=90,
                   what="18 rate-limited jobs done")  # fmt: skip
    finally:
        stop(procs)
    jobs = [q.get_job(i) for i in ids]
    claimed: dict[int, list[datetime]] = defaultdict(list)
    for job in jobs:
        assert job is not None and job.attempted_at is not None and job.attempts == 1
        claimed[job.payload["account"]].append(job.attempted_at)
    for account, times in claimed.items():
        times.sort()
        # Any four starts of one key span at least a second: no window holds more than 3.
        spans = [(times[i + 3] - times[i]).total_seconds() for i in range(len(times) - 3)]
        assert min(spans) >= 1.0 - 0.02, (account, spans)
    # The two keys' windows are their own: six starts in the first second between them.
    first = sorted(t for times in claimed.values() for t in times)
    assert (first[5] - first[0]).total_seconds() < 1.0, first[:6]
    assert sorted(spans_by_key(runs_dir, "rated_per_account")) == ["0", "1"]
    assert len({n["pid"] for n in runs(runs_dir)}) == 3, "every worker ran some"


@pytest.mark.timeout(120)
def test_a_rate_limit_per_key_holds_across_workers(db_url: str, tmp_path: Path) -> None:
    q = keyed_queue(db_url)
    run_rated_per_account(q, lambda: three_workers(db_url, tmp_path), tmp_path)


@pytest.mark.timeout(120)
def test_a_killed_workers_key_slot_comes_back_when_its_lease_runs_out(
    db_url: str, tmp_path: Path
) -> None:
    q = keyed_queue(db_url)
    [first] = q.enqueue_many([("per_account", {"account": "acme", "hang_first": True})])
    [victim] = workers(1, db_url, tmp_path, "--poll-interval", POLL, lease="3")
    with victim:
        eventually(lambda: any(n["id"] == first for n in runs(tmp_path)),
                   what="the victim to start acme's first job")  # fmt: skip
        [survivor] = workers(1, db_url, tmp_path, "--poll-interval", POLL, lease="3")
        with survivor:
            second = q.enqueue("per_account", {"account": "acme"})
            other = q.enqueue("per_account", {"account": "globex"})
            eventually(lambda: q.get_job(other).status.value == "done",  # type: ignore[union-attr]
                       what="globex's job, not held up by acme's")  # fmt: skip
            assert q.get_job(second).status.value == "pending"  # type: ignore[union-attr]
            victim.send(signal.SIGKILL)
            assert victim.wait() == -signal.SIGKILL
            held = q.get_job(first)
            assert held is not None and held.lease_expires_at is not None
            eventually(lambda: done_of(q, "per_account") == 3, timeout=30,
                       what="every per-account job done on the survivor")  # fmt: skip
            stop([survivor])
    ran = q.get_job(second)
    assert ran is not None and ran.attempted_at is not None
    assert ran.attempted_at >= held.lease_expires_at  # not before the lease ran out...
    assert (ran.attempted_at - held.lease_expires_at).total_seconds() < 5  # ...then soon
    again = q.get_job(first)
    assert again is not None and again.attempts == 2


def test_sampler_sees_running_jobs(db_url: str) -> None:
    """The database check above can fail: it counts a key's running jobs."""
    q = keyed_queue(db_url)
    q.enqueue_many([("per_account", {"account": "acme"})] * 2)
    from tickq.store import open_store

    store = open_store(db_url, None)  # a claimer that ignores limits: no declaration
    try:
        assert len(store.claim("someone", 10, 30.0)) == 2
    finally:
        store.close()
    with RunningSampler(q, "per_account") as sampler:
        time.sleep(0.1)
    assert sampler.most["acme"] == 2


@pytest.mark.timeout(150)
def test_jobs_short_enough_to_be_claimed_ahead_still_run_one_per_key(
    db_url: str, tmp_path: Path
) -> None:
    """Jobs of a millisecond, more keys than slots: the workers claim jobs ahead of their
    free slots (a keyed type with only a concurrency limit may be), and one waiting in a
    worker's line counts as running for its key, so no key ever has two running, in the
    ledger or in the database."""
    q = keyed_queue(db_url)
    many = [f"acct{n:02}" for n in range(30)]
    procs = three_workers(db_url, tmp_path, slots=2)
    with RunningSampler(q, "per_account") as sampler:
        try:
            q.enqueue_many([("per_account", {"account": k, "seconds": 0.001},
                             {"queue": f"q{(n + i) % 3 + 1}"})
                            for n in range(10) for i, k in enumerate(many)])  # fmt: skip
            eventually(lambda: done_of(q, "per_account") == 300, timeout=90, what="300 jobs")
        finally:
            stop(procs)
    by_key = spans_by_key(tmp_path, "per_account")
    assert sorted(by_key) == many and all(len(s) == 10 for s in by_key.values())
    for key, spans in by_key.items():
        assert most_at_once(spans) == 1, f"two jobs of {key} ran at once"
    assert sampler.samples > 5 and max(sampler.most.values()) == 1, dict(sampler.most)
    assert all(j.attempts == 1 for j in q.list_jobs("done", limit=300))
