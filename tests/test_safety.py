"""Claiming safety with real processes: exactly once, crash recovery, fenced late finishes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from conftest import tickq_env
from tickq import FrozenClock, JobContext, Queue
from tickq.store import Outcome
from tickq.store.queries import migrations

DRAIN = "from apps.counter import q\nwhile q.process_jobs(limit=100)['claimed']:\n    pass\n"


def spawn(code: str, db_url: str, out: Path, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code],
        env=tickq_env(TICKQ_DATABASE_URL=db_url, TICKQ_TEST_OUT=str(out), **env),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def executions(out: Path) -> Counter[int]:
    seen: Counter[int] = Counter()
    for path in out.glob("executions-*.txt"):
        seen.update(int(line) for line in path.read_text().split())
    return seen


def test_four_processes_run_each_of_2000_jobs_exactly_once(db_url: str, tmp_path: Path) -> None:
    from apps.counter import record  # noqa: F401  (registers the job type)

    q = Queue(db_url, strict=False)
    q.migrate()
    q.enqueue_many([("record", {"n": n}) for n in range(2000)])
    procs = [spawn(DRAIN, db_url, tmp_path) for _ in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    seen = executions(tmp_path)
    assert sorted(seen) == list(range(2000)), "every job ran"
    assert max(seen.values()) == 1, "no job ran twice"
    assert len(list(tmp_path.glob("executions-*.txt"))) >= 2, "the work was shared"
    assert q.stats()["by_status"]["done"] == 2000


def test_a_killed_workers_job_is_rescued_after_its_lease(db_url: str, tmp_path: Path) -> None:
    Queue(db_url).migrate()
    victim = spawn("from apps.counter import q, hang\nhang.enqueue()\nq.process_jobs()\n",
                   db_url, tmp_path)  # fmt: skip
    _wait_for(tmp_path / "started-1", victim)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=10)

    later = FrozenClock()
    later.advance(minutes=2)  # past the 60 s lease, without waiting for it
    rescuer = Queue(db_url, clock=later)

    @rescuer.job(name="hang")
    def hang_again(ctx: JobContext) -> None:
        (tmp_path / f"started-{ctx.attempt}").write_text("rescuer")

    report = rescuer.process_jobs()
    # Killed before any round trip or lease renewal recorded that the job started: the
    # attempt is refunded (once), and the history says so.
    assert (report["refunded"], report["rescued"], report["succeeded"]) == (1, 0, 1)
    job = rescuer.list_jobs()[0]
    assert (job.status, job.attempts) == ("done", 1)
    lost, won = rescuer.attempts(job.id)
    assert (lost.attempt, lost.outcome, won.attempt, won.outcome) == (1, "refunded", 1, "done")
    assert "stopped renewing its lease" in (lost.error or "")
    assert "not counted" in (lost.error or "")
    assert (tmp_path / "started-1").read_text() == "rescuer"  # ran again, as attempt 1


def test_a_late_finisher_changes_nothing_after_its_job_was_rescued(db_url: str) -> None:
    slow_clock, fast_clock = FrozenClock(), FrozenClock()
    slow = Queue(db_url, clock=slow_clock)
    slow.migrate()
    fast = Queue(db_url, clock=fast_clock)
    release, started = threading.Event(), threading.Event()
    runs: list[tuple[str, int]] = []

    for q, name in ((slow, "slow"), (fast, "fast")):

        def work(ctx: JobContext, _name: str = name) -> None:
            runs.append((_name, ctx.attempt))
            if _name == "slow":
                started.set()
                release.wait(30)

        q.job(name="work")(work)

    job_id = slow.enqueue("work")
    reports: list[dict] = []
    t = threading.Thread(target=lambda: reports.append(slow.process_jobs()))
    t.start()
    assert started.wait(30)
    fast_clock.advance(minutes=5)  # the slow worker's lease has long expired
    assert fast.process_jobs()["succeeded"] == 1
    release.set()
    t.join(30)
    assert reports[0]["stale"] == 1 and reports[0]["succeeded"] == 0
    job = fast.get_job(job_id)
    # Its start never confirmed (no renewal yet), the slow run was refunded: the fast one
    # ran under the same attempt number, and the late finish is fenced by the owner.
    assert job is not None and (job.status, job.attempts) == ("done", 1)
    assert runs == [("slow", 1), ("fast", 1)]
    assert [(a.attempt, a.outcome) for a in fast.attempts(job_id)] == [(1, "refunded"), (1, "done")]

    # A late failure is fenced just the same.
    assert slow._store.record(slow._runtime.owner, [Outcome(job, "failed", "late")]).stale == [job]
    assert fast.get_job(job_id).status == "done"  # type: ignore[union-attr]


def test_concurrent_migrations_from_several_processes(db_url: str, tmp_path: Path) -> None:
    code = (
        "import os\nfrom tickq import Queue\n"
        "print(Queue(os.environ['TICKQ_DATABASE_URL']).migrate())"
    )
    procs = [spawn(code, db_url, tmp_path) for _ in range(4)]
    outputs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    every = str(
        [version for version, _, _ in migrations("postgres" if "postgres" in db_url else "sqlite")]
    )
    assert sorted(out.strip() for out, _ in outputs) == sorted([every, "[]", "[]", "[]"])


def _wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"process exited early: {proc.communicate()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{path.name} never appeared")
        time.sleep(0.02)
