"""``tickq jobs | show | retry | cancel | prune | stats`` run as real subprocesses."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest

from conftest import ROOT, run_tickq
from tickq import FrozenClock, JobState, Queue


def _fails(n: int) -> None:
    raise LookupError(f"no such customer {n}")


def _setup(db_url: str, clock: FrozenClock | None = None) -> Queue:
    q = Queue(db_url, clock=clock)
    q.migrate()

    @q.job()
    def welcome(user_id: int) -> None:
        pass

    q.job(name="bill", max_attempts=1)(_fails)
    q.job(name="ship", queue="warehouse", max_attempts=1)(_fails)
    return q


@pytest.fixture
def q(db_url: str) -> Queue:
    """3 done welcome jobs, 4 failed bill jobs, 1 failed ship job, 1 pending welcome."""
    q = _setup(db_url)
    q.enqueue_many([("welcome", {"user_id": n}) for n in range(3)])
    q.enqueue_many([("bill", {"n": n}) for n in range(4)])
    q.enqueue("ship", {"n": 99})
    q.process_jobs()
    q.enqueue("welcome", {"user_id": 42})
    return q


def tickq(*args: str) -> tuple[int, str, str]:
    result = run_tickq(*args)
    return result.returncode, result.stdout, result.stderr


def user_error(code: int, err: str) -> str:
    assert code == 1 and "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith("tickq: error: ")
    return err


def test_jobs_lists_newest_first_filters_and_pages(q: Queue, db_url: str) -> None:
    code, out, _ = tickq("jobs", "--url", db_url)
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[:5] == ["ID", "STATUS", "TYPE", "QUEUE", "TRIES"]
    assert [int(line.split()[0]) for line in lines[1:]] == list(range(9, 0, -1))
    assert "LookupError: no such customer 3" in out

    code, out, _ = tickq("jobs", "--url", db_url, "--status", "failed", "--type", "bill",
                         "--limit", "3")  # fmt: skip
    rows = out.splitlines()[1:4]
    assert code == 0 and [r.split()[:3] for r in rows] == [["7", "failed", "bill"],
                                                           ["6", "failed", "bill"],
                                                           ["5", "failed", "bill"]]  # fmt: skip
    assert out.splitlines()[-1] == "more: tickq jobs --before 5 --status failed --type bill"

    code, out, _ = tickq("jobs", "--url", db_url, "--json", "--limit", "3", "--before", "5",
                         "--status", "failed")  # fmt: skip
    page = json.loads(out)
    assert [j["id"] for j in page["jobs"]] == [4] and page["next_before"] is None

    code, out, _ = tickq("jobs", "--url", db_url, "--queue", "warehouse", "--json")
    assert [j["type"] for j in json.loads(out)["jobs"]] == ["ship"]
    code, out, _ = tickq("jobs", "--url", db_url, "--type", "bill", "--status", "done")
    assert (code, out) == (0, "no jobs match\n")


def test_show_prints_the_payload_and_every_attempt_with_its_error(q: Queue, db_url: str) -> None:
    code, out, _ = tickq("show", "8", "--url", db_url)
    assert code == 0
    assert out.startswith("job 8  ship\n  status     failed\n  queue      warehouse (priority 0)")
    assert '"n": 99' in out
    assert "\nattempt 1  error  " in out
    assert "  LookupError: no such customer 99\n  Traceback" in out
    assert "Traceback (most recent call last):" in out and "in _fails" in out

    code, out, _ = tickq("show", "--json", "1", "--url", db_url)
    data = json.loads(out)
    assert data["job"]["payload"] == {"user_id": 0} and data["job"]["status"] == "done"
    [attempt] = data["attempts"]
    assert attempt["outcome"] == "done" and attempt["error_type"] is None
    assert attempt["duration_seconds"] is not None

    err = user_error(*tickq("show", "999999", "--url", db_url)[::2])
    assert "job 999999 does not exist" in err
    err = user_error(*tickq("show", "--url", db_url)[::2])
    assert "give the job's ID, e.g. tickq show 42" in err
    err = user_error(*tickq("show", "abc", "--url", db_url)[::2])
    assert "unexpected argument 'abc'" in err


def test_retry_one_job_or_every_failed_job_with_progress(q: Queue, db_url: str) -> None:
    code, out, _ = tickq("retry", "8", "--url", db_url)
    assert code == 0 and out == (
        "job 8 (ship) is pending again, due now; attempt 2 of 2 comes next\n")  # fmt: skip
    assert q.get_job(8).status == JobState.PENDING  # type: ignore[union-attr]

    err = user_error(*tickq("retry", "1", "--url", db_url)[::2])
    assert "cannot retry job 1: it is done" in err and "already succeeded" in err
    err = user_error(*tickq("retry", "--url", db_url)[::2])
    assert "give either a job ID or --failed" in err

    code, out, err = tickq("retry", "--failed", "--type", "bill", "--batch", "3", "--url", db_url)
    assert code == 0 and out == "retried 4 failed jobs of type 'bill'\n"
    assert err.splitlines() == ["retried 3/4 (75%)", "retried 4/4 (100%)"]
    assert q.stats()["by_type"]["bill"] == {"pending": 4}

    code, out, err = tickq("retry", "--failed", "--json", "--url", db_url)
    assert code == 0 and json.loads(out) == {"retried": 0, "left_failed": 0} and err == ""


def test_cancel(q: Queue, db_url: str) -> None:
    code, out, _ = tickq("cancel", "9", "--url", db_url, "--json")
    assert code == 0 and json.loads(out)["status"] == "cancelled"
    err = user_error(*tickq("cancel", "9", "--url", db_url)[::2])
    assert "cannot cancel job 9: it is cancelled" in err

    running = q.enqueue("welcome", {"user_id": 5})
    q._store.claim("worker-7", 1, 60)
    code, out, _ = tickq("cancel", str(running), "--url", db_url)
    assert out == (f"job {running} (welcome) is running attempt 1 on worker-7: asked it to "
                   "stop; it ends cancelled once its worker hears (within about a second)"
                   "\n")  # fmt: skip
    job = q.get_job(running)
    assert job is not None and job.status == "running" and job.cancel_requested_at is not None
    code, out, _ = tickq("cancel", str(running), "--url", db_url, "--json")  # asking again
    asked = job.to_dict()["cancel_requested_at"]
    assert code == 0 and json.loads(out)["cancel_requested_at"] == asked
    code, out, _ = tickq("show", str(running), "--url", db_url)
    assert code == 0 and "\n  status     running\n" in out and "\n  cancel     requested " in out


def test_prune_deletes_only_old_finished_jobs(db_url: str) -> None:
    clock = FrozenClock()
    clock.advance(days=-10)
    old = _setup(db_url, clock)
    old.enqueue_many([("welcome", {"user_id": n}) for n in range(5)] + [("bill", {"n": 1})])
    old.process_jobs()
    new = _setup(db_url)
    new.enqueue("welcome", {"user_id": 7})
    new.process_jobs()
    old.enqueue("welcome", {"user_id": 6})  # pending: never pruned, however old

    code, out, err = tickq("prune", "--older-than", "7d", "--batch", "4", "--url", db_url)
    assert code == 0
    assert out == "deleted 6 finished jobs (and their attempts) that finished more than 7d ago\n"
    assert err.splitlines() == ["deleted 4", "deleted 6"]
    assert new.stats()["by_status"] == {"pending": 1, "running": 0, "done": 1, "failed": 0,
                                        "cancelled": 0}  # fmt: skip
    err = user_error(*tickq("prune", "--older-than", "a week", "--url", db_url)[::2])
    assert "--older-than must be a duration like 7d, 12h, 30m or 1d12h, got 'a week'" in err
    code, out, _ = tickq("prune", "--older-than", "1d12h", "--json", "--url", db_url)
    assert json.loads(out) == {"deleted": 0, "older_than_seconds": 129600.0}


def test_stats(q: Queue, db_url: str) -> None:
    code, out, _ = tickq("stats", "--url", db_url)
    assert code == 0
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:5]}
    assert rows == {"bill": ["0", "0", "0", "4", "0"], "ship": ["0", "0", "0", "1", "0"],
                    "welcome": ["1", "0", "3", "0", "0"],
                    "(all)": ["1", "0", "3", "5", "0"]}  # fmt: skip
    assert "due now: 1; oldest due job waiting" in out
    assert "failed in the last hour: 5 job(s), 5 failed attempt(s)" in out
    assert "attempts so far: done 3, error 5" in out

    code, out, _ = tickq("stats", "--json", "--url", db_url)
    data = json.loads(out)
    assert data["by_status"]["failed"] == 5 and data["processed"]["warehouse"]["ship"] == {
        "error": 1}  # fmt: skip


def test_commands_find_the_queue_from_app_or_the_environment(
    q: Queue, db_url: str, tmp_path: Path
) -> None:
    (tmp_path / "shopapp.py").write_text(
        "import os\nfrom tickq import Queue\nq = Queue(os.environ['SHOP_DB'])\n"
    )
    path = os.pathsep.join([str(ROOT / "src"), str(tmp_path)])
    result = run_tickq("jobs", "shopapp:q", "--status", "pending", PYTHONPATH=path, SHOP_DB=db_url)
    assert result.returncode == 0 and "welcome" in result.stdout
    result = run_tickq("show", "shopapp:q", "9", PYTHONPATH=path, SHOP_DB=db_url)
    assert result.returncode == 0 and result.stdout.startswith("job 9  welcome")
    result = run_tickq("stats", "--json", TICKQ_DATABASE_URL=db_url)
    assert result.returncode == 0 and json.loads(result.stdout)["due"] == 1

    result = run_tickq("jobs", "nosuchmodule:q", PYTHONPATH=path)
    assert "cannot import 'nosuchmodule'" in user_error(result.returncode, result.stderr)


def test_a_database_without_tables_is_one_line(tmp_path: Path) -> None:
    result = run_tickq("stats", "--url", f"sqlite:///{tmp_path / 'empty.db'}")
    assert "run q.migrate() or `tickq migrate APP` first" in user_error(
        result.returncode, result.stderr)  # fmt: skip


def test_retried_jobs_are_due_now(q: Queue, db_url: str) -> None:
    tickq("retry", "--failed", "--url", db_url)
    report = q.process_jobs()
    assert report["claimed"] == 6 and report["failed"] == 5  # the 5 failed again, 1 welcome
    assert [a.attempt for a in q.attempts(4)] == [1, 2]
    assert q.get_job(4).max_attempts == 2  # type: ignore[union-attr]
    assert timedelta(0) <= q._store.now() - q.get_job(4).finished_at  # type: ignore[union-attr,operator]
