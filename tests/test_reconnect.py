"""The first call after a real Postgres restart succeeds, and nothing runs twice."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest

from pgcluster import Cluster, own_cluster
from tickq import Queue

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with own_cluster() as c:
        yield c


def test_every_first_call_after_a_restart_succeeds(cluster: Cluster) -> None:
    queues = [Queue(cluster.url) for _ in range(5)]
    first = queues[0]
    first.migrate()
    ran: list[int] = []
    for q in queues:
        q.job(name="note")(lambda n: ran.append(n))
        q.enqueue("note", {"n": -1})  # every Queue holds a live connection
    assert first.process_jobs()["succeeded"] == 5

    cluster.restart()  # each Queue's connection is now dead, unknown to it
    enqueuer, ticker, processor, reader, lister = queues
    job_id = enqueuer.enqueue("note", {"n": 1})
    assert ticker.tick()["jobs"]["succeeded"] == 1
    job_id2 = enqueuer.enqueue("note", {"n": 2})
    cluster.restart()
    enqueuer.enqueue("note", {"n": 3})
    assert processor.process_jobs()["succeeded"] == 2
    job = reader.get_job(job_id)
    assert job is not None and job.status == "done"
    assert lister.stats()["by_status"]["done"] == 8

    with psycopg.connect(cluster.url) as conn:
        rows = conn.execute("SELECT count(*), count(DISTINCT id) FROM tickq_jobs").fetchone()
    assert rows == (8, 8), "no job inserted twice"
    assert sorted(ran) == [-1] * 5 + [1, 2, 3], "every job ran once"
    assert [a.outcome for a in first.attempts(job_id2)] == ["done"]
    for q in queues:
        q.close()


def test_a_call_while_the_database_is_down_still_fails_clearly(cluster: Cluster) -> None:
    q = Queue(cluster.url)
    q.migrate()
    q.stats()
    cluster.ctl("stop")
    try:
        from tickq import DatabaseUnavailable

        with pytest.raises(DatabaseUnavailable, match="unreachable"):
            q.stats()
    finally:
        cluster.ctl("start")
    assert q.stats()["by_status"]["pending"] >= 0  # and works once it is back
    q.close()


def test_a_tick_keeps_a_finished_job_while_the_database_is_down_for_seconds(
    cluster: Cluster,
) -> None:
    """The job takes the database down for longer than a few quick retries cover: the tick
    keeps its outcome and records it once the server is back (within half the lease), so
    the job is done, ran once, and has no lease_expired attempt."""
    q = Queue(cluster.url, lease_seconds=30)
    q.migrate()
    ran: list[int] = []
    back = threading.Timer(6.0, cluster.ctl, ("start",))

    @q.job(max_attempts=3)
    def outage(n: int) -> None:
        ran.append(n)
        cluster.ctl("stop")
        back.start()

    job_id = outage.enqueue(n=1)
    try:
        report = q.tick()
    finally:
        back.join(timeout=60)
    assert report["jobs"]["succeeded"] == 1 and ran == [1]
    job = q.get_job(job_id)
    assert job is not None and job.status == "done"
    assert [a.outcome for a in q.attempts(job_id)] == ["done"]
    q.close()
