"""The CLI refuses queue and job type names nobody uses, naming the nearest known one
(``tickq pause APP emial``, ``--type sned``), as ``q.enqueue("sned")`` does in Python."""

from __future__ import annotations

import pytest

from conftest import run_tickq
from tickq import Queue

APP = "apps.controls_app:q"


@pytest.fixture
def env(db_url: str) -> dict[str, str]:
    q = Queue(db_url)
    q.migrate()
    q.close()
    return {"TICKQ_DATABASE_URL": db_url, "TICKQ_TEST_RUNS": "."}


def refused(result: object, *phrases: str) -> str:
    code, err = result.returncode, result.stderr  # type: ignore[attr-defined]
    assert code == 1 and "Traceback" not in err and err.startswith("tickq: error: "), err
    for phrase in phrases:
        assert phrase in err, err
    return str(err)


def test_pause_refuses_a_queue_no_job_uses_and_names_the_nearest(
    env: dict[str, str], db_url: str
) -> None:
    err = refused(run_tickq("pause", APP, "emial", **env),
                  "no queue 'emial'", "did you mean 'emails'?", "'default'", "--force")  # fmt: skip
    assert err.count("\n") == 1
    assert Queue(db_url).paused() == set(), "nothing was paused"
    forced = run_tickq("pause", APP, "reports", "--force", **env)
    assert forced.returncode == 0 and "queue 'reports' paused" in forced.stdout
    assert run_tickq("pause", APP, "emails", **env).returncode == 0
    assert Queue(db_url).paused() == {"reports", "emails"}


def test_resume_refuses_an_unknown_queue_but_not_one_that_is_merely_running(
    env: dict[str, str],
) -> None:
    run_tickq("pause", APP, "emails", **env)
    refused(run_tickq("resume", APP, "emials", **env), "did you mean 'emails'?")
    quiet = run_tickq("resume", APP, "default", **env)
    assert quiet.returncode == 0 and "was not paused" in quiet.stdout


def test_a_queue_known_only_from_the_database_is_accepted_with_url(
    env: dict[str, str], db_url: str
) -> None:
    q = Queue(db_url)
    q.job(name="resize", queue="images")(lambda: None)
    q.enqueue("resize")
    assert run_tickq("pause", "--url", db_url, "images", **env).returncode == 0
    refused(run_tickq("pause", "--url", db_url, "imgaes", **env), "did you mean 'images'?")


def test_retry_and_jobs_refuse_a_type_nobody_has(env: dict[str, str], db_url: str) -> None:
    err = refused(run_tickq("retry", APP, "--failed", "--type", "sned", **env),
                  "no job type 'sned'", "'capped'", "'email'")  # fmt: skip
    assert "did you mean" not in err
    assert "database. Known job types: 'brisk', 'capped', 'chore'" in err
    refused(run_tickq("jobs", APP, "--type", "emial", **env), "did you mean 'email'?")
    refused(run_tickq("jobs", "--type", "emial", **env, TICKQ_APP=APP), "did you mean 'email'?")
    refused(run_tickq("jobs", APP, "--queue", "emial", **env), "did you mean 'emails'?")
    known = run_tickq("jobs", APP, "--type", "email", **env)
    assert (known.returncode, known.stdout) == (0, "no jobs match\n"), known.stderr
    done = run_tickq("retry", APP, "--failed", "--type", "email", **env)
    assert done.returncode == 0 and "retried 0" in done.stdout, done.stderr


def test_a_type_known_only_from_stored_jobs_is_accepted_with_url(db_url: str) -> None:
    q = Queue(db_url)
    q.migrate()
    q.job(name="send")(lambda: None)
    q.enqueue("send")
    env = {"TICKQ_DATABASE_URL": db_url}
    listed = run_tickq("jobs", "--url", db_url, "--type", "send", **env)
    assert listed.returncode == 0 and "send" in listed.stdout
    refused(run_tickq("jobs", "--url", db_url, "--type", "sned", **env), "did you mean 'send'?")
