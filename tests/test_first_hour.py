"""A newcomer's first-hour mistakes get a clear answer, not a traceback through tickq's own
code or a silent surprise (issue 29, found 4)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from conftest import run_tickq, tickq_env
from dashboard_serving import serving
from test_dashboard_http import PASSWORD, csrf, login
from tickq import FrozenClock, JobContext, Queue
from tickq.errors import ConfigurationError

BROKEN = """\
import json


def load_settings():
    return json.loads("{not json")


SETTINGS = load_settings()
"""


def test_an_app_that_fails_to_import_shows_the_users_frames_only(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text(BROKEN)
    result = subprocess.run([sys.executable, "-m", "tickq", "worker", "broken:q"],
                            capture_output=True, text=True, timeout=60, cwd=tmp_path,
                            env=tickq_env())  # fmt: skip
    err = result.stderr
    assert result.returncode == 1, err
    assert 'broken.py", line 8, in <module>' in err and "in load_settings" in err, err
    assert "tickq/cli" not in err and "importlib" not in err and "tickq/__main__" not in err
    last = err.rstrip().splitlines()[-1]
    assert last.startswith("tickq: error: importing APP 'broken:q' failed in your code"), last
    assert "JSONDecodeError" in last


@pytest.mark.parametrize("command", [["demo", "--no-serve"], ["dashboard", "x:q"]])
def test_a_port_out_of_range_is_one_clear_line(command: list[str]) -> None:
    result = run_tickq(*command, "--port", "99999")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "--port: must be a port number from 1 to 65535 (or 0 for any free port), got " \
           "'99999'" in result.stderr  # fmt: skip


def test_demo_help_says_what_the_demo_does() -> None:
    out = run_tickq("demo", "--help").stdout
    assert "bookings app end to end" in out and "--no-serve" in out
    assert re.search(r"\n\nRun the guide's bookings app", out), out


def test_no_database_names_every_way_to_give_one() -> None:
    result = run_tickq("jobs")
    assert result.returncode == 1
    assert "TICKQ_APP" in result.stderr and "TICKQ_DATABASE_URL" in result.stderr
    assert "--url" in result.stderr


def test_prune_prints_one_deleted_line(db_url: str) -> None:
    q = Queue(db_url)
    q.migrate()
    q.job(name="chore")(lambda: None)
    q.enqueue_many([("chore", {}) for _ in range(3)])
    q.process_jobs()
    result = run_tickq("prune", "--older-than", "0s", "--url", db_url)
    assert result.returncode == 0, result.stderr
    lines = (result.stdout + result.stderr).splitlines()
    assert [line for line in lines if "deleted" in line] == [
        "deleted 3 finished jobs (and their attempts) that finished more than 0.0s ago"
    ]


@pytest.mark.parametrize("cron", ["*/61 * * * *", "0 */25 * * *", "0 0 */32 * *", "0 0 * * 1/8"])
def test_a_cron_step_beyond_its_field_is_refused(cron: str) -> None:
    q = Queue("sqlite:///:memory:")
    with pytest.raises(ConfigurationError, match=r"is larger than the \w[\w-]* field's range"):
        q.schedule(cron, name="report")(lambda: None)
    result = run_tickq("scheduler", "github-actions", "--cron", cron)
    assert result.returncode == 1 and "field's range" in result.stderr, result.stderr


@pytest.mark.parametrize("cron", ["*/60 * * * *", "0 */24 * * *", "0 0 * * */7", "*/15 * * * *"])
def test_a_step_that_fits_its_field_is_accepted(cron: str) -> None:
    Queue("sqlite:///:memory:").schedule(cron, name="report")(lambda: None)


def test_jobs_shows_no_last_error_for_a_done_job(db_url: str) -> None:
    q = Queue(db_url, clock=(clock := FrozenClock()))
    q.migrate()

    @q.job(backoff=(60,))
    def flaky(ctx: JobContext) -> None:
        if ctx.attempt == 1:
            raise RuntimeError("provider down")

    job_id = q.enqueue("flaky")
    q.process_jobs()
    clock.advance(seconds=120)
    q.process_jobs()
    assert q.get_job(job_id).status.value == "done"  # type: ignore[union-attr]
    waiting = q.enqueue("flaky")
    q.process_jobs()
    out = run_tickq("jobs", "--url", db_url).stdout
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "provider down" not in rows[str(job_id)], out
    assert "provider down" in rows[str(waiting)], "a job still retrying keeps its error"


def test_a_retry_by_hand_explains_the_extra_attempt_on_the_page(queue: Queue) -> None:
    @queue.job(max_attempts=3, backoff=(0,))
    def charge() -> None:
        raise RuntimeError("card declined")

    job_id = queue.enqueue("charge")
    while queue.get_job(job_id).status.value != "failed":  # type: ignore[union-attr]
        queue.process_jobs()
    with serving(queue.asgi_app(dashboard={"password": PASSWORD})) as base, httpx.Client() as c:
        login(c, base)
        before = c.get(f"{base}/tickq/jobs/{job_id}").text
        assert "3 of 3" in before and "retry by hand" not in before
        retried = c.post(f"{base}/tickq/jobs/{job_id}/retry", data={"csrf_token": csrf(before)},
                         follow_redirects=True)  # fmt: skip
        assert "3 of 4" in retried.text
        assert "charge allows 3 attempts; a retry by hand" in retried.text
        assert "allowed one more" in retried.text
