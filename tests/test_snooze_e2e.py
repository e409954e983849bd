"""Submit now, collect later, end to end: ``examples/batch_collect_later.py`` polls a real
little HTTP batch API (in a thread of this test) and snoozes until the batch is done. Every
tick runs in a new process (``tickq tick``, or a restarted server of the tick endpoint), as
on a host that sleeps between scheduler calls; their shared clock is moved on instead of
waiting ten minutes. Then a real worker process snoozes, and is killed."""

from __future__ import annotations

import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from conftest import ROOT, run_tickq, tickq_env
from tickq import Job, JobState, Queue
from tickq.testing import SharedClock
from workerproc import WorkerProcess, eventually, runs

EXAMPLE = ROOT / "examples" / "batch_collect_later.py"
APP = "examples.batch_collect_later:q"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("batch_collect_later_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def batch_api() -> Iterator[Any]:
    """The fake batch API, serving on a real socket: a batch is done after two looks."""
    api = load_example().FakeBatchAPI(polls=2).start()
    yield api
    api.shutdown()
    api.server_close()


TOKEN = "snooze-e2e-token-0123456789abcdef"
Tick = Callable[[], dict[str, Any]]


@pytest.fixture
def clock(tmp_path: Path) -> SharedClock:
    """The time of every process of the test, moved on at once."""
    return SharedClock(tmp_path / "clock")


@pytest.fixture
def app_env(db_url: str, clock: SharedClock, batch_api: Any) -> dict[str, str]:
    return {
        "TICKQ_DATABASE_URL": db_url, "TICKQ_CLOCK_FILE": clock.path,
        "BATCH_API_URL": batch_api.url, "CRON_SECRET": TOKEN,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }  # fmt: skip


def test_a_job_snoozes_until_the_batch_is_done_across_tick_processes(
    db_url: str, clock: SharedClock, batch_api: Any, app_env: dict[str, str]
) -> None:
    """Each tick is ``tickq tick`` in a new process, as a host's own cron runs it."""

    def tick() -> dict[str, Any]:
        result = run_tickq("tick", APP, timeout=60, **app_env)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)  # type: ignore[no-any-return]

    submit_then_collect(db_url, clock, batch_api, tick)


def test_the_tick_endpoint_collects_the_batch_across_killed_servers(
    db_url: str, clock: SharedClock, batch_api: Any, app_env: dict[str, str], tmp_path: Path
) -> None:
    """Each tick is ``POST /api/cron/tick`` over a real socket to a new server process of
    the example's ASGI app; the server before it is killed with SIGKILL first."""
    servers: list[subprocess.Popen[str]] = []

    def tick() -> dict[str, Any]:
        if servers:
            servers[-1].kill()
            servers[-1].wait(10)
        base = start_server(app_env, tmp_path / f"server-{len(servers)}.log", servers)
        request = urllib.request.Request(f"{base}/api/cron/tick", method="POST")
        request.add_header("Authorization", f"Bearer {TOKEN}")
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]

    try:
        submit_then_collect(db_url, clock, batch_api, tick)
    finally:
        for server in servers:
            server.kill()
            server.wait(10)
    assert len(servers) == 5


def start_server(env: dict[str, str], log: Path, servers: list[subprocess.Popen[str]]) -> str:
    """Start the example's ASGI app in a new process; its base URL once it listens."""
    with log.open("w") as errors:
        server = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "asgi_process.py"), APP.replace(":q", ":app")],
            stdout=subprocess.PIPE, stderr=errors, text=True, env=tickq_env(**env), cwd=ROOT,
        )  # fmt: skip
    servers.append(server)
    assert server.stdout is not None
    ready, _, _ = select.select([server.stdout], [], [], 30)
    line = server.stdout.readline() if ready else ""
    if not line.startswith("serving on "):
        pytest.fail(f"the tick server did not start: {line!r}\n{log.read_text()}")
    return line.removeprefix("serving on ").strip()


def submit_then_collect(db_url: str, clock: SharedClock, batch_api: Any, tick: Tick) -> None:
    """Submit a batch, tick until the collector has its results: it snoozes while the batch
    is in progress, runs at the first tick after each snooze, and collects once."""
    q = Queue(db_url, clock=clock, strict=False)
    q.migrate()
    q.enqueue("submit_batch", {"prompts": ["q3 sales", "q4 sales"]})

    first = tick()  # submits, then the collector takes its first look and snoozes
    assert (first["jobs"]["succeeded"], first["jobs"]["snoozed"]) == (1, 1)
    [collector] = q.list_jobs(type="collect_batch")
    assert collector.status is JobState.PENDING and collector.attempts == 0
    assert collector.snoozes == 1 and collector.lease_owner is None
    assert collector.run_after - clock.now() > timedelta(minutes=9)
    assert first["next_due_at"] == collector.run_after.isoformat()

    again = tick()  # before the ten minutes are up: nothing to run
    assert again["jobs"]["claimed"] == 0
    assert again["next_due_at"] == collector.run_after.isoformat()

    clock.advance(minutes=10)
    second = tick()  # still in progress: snoozes again
    assert (second["jobs"]["snoozed"], second["jobs"]["failed"]) == (1, 0)

    clock.advance(minutes=10)
    last = tick()  # done: collects the results
    assert (last["jobs"]["succeeded"], last["jobs"]["snoozed"]) == (1, 0)
    assert last["next_due_at"] is None

    done = q.get_job(collector.id)
    assert done is not None and done.status is JobState.DONE
    assert done.result == ["summary of 'q3 sales'", "summary of 'q4 sales'"]
    assert (done.attempts, done.snoozes) == (1, 2)
    assert [a.outcome for a in q.attempts(collector.id)] == ["snoozed", "snoozed", "done"]
    assert batch_api.calls == [
        "POST /batches",
        "GET /batches/batch_1", "GET /batches/batch_1", "GET /batches/batch_1",
        "GET /batches/batch_1/results",
    ]  # fmt: skip
    assert tick()["jobs"]["claimed"] == 0  # collected once, never again
    q.close()


@pytest.mark.timeout(90)
def test_a_worker_runs_a_snoozed_job_again_on_time_and_after_a_kill(
    db_url: str, tmp_path: Path
) -> None:
    """A real worker process that polls only every 600 s runs a snoozed job again when its
    snooze ends; killed (SIGKILL) while a job snoozes, the next worker runs it."""
    notes = tmp_path / "runs"
    notes.mkdir()
    env = {"TICKQ_DATABASE_URL": db_url, "TICKQ_TEST_RUNS": str(notes)}
    q = Queue(db_url, strict=False)
    q.migrate()

    def job(job_id: int) -> Job:
        found = q.get_job(job_id)
        assert found is not None
        return found

    with WorkerProcess("--poll-interval", "600", **env) as first:
        quick = q.enqueue("doze", {"times": 3, "seconds": 0.2})
        eventually(lambda: job(quick).status is JobState.DONE, timeout=20, what="quick doze")
        # Snooze(0): recorded and claimed again by the same worker in one round trip
        zero = q.enqueue("doze", {"times": 5, "seconds": 0})
        eventually(lambda: job(zero).status is JobState.DONE, timeout=20, what="zero doze")
        slow = q.enqueue("doze", {"times": 1, "seconds": 2})
        eventually(lambda: job(slow).snoozes == 1, timeout=20, what="the first snooze")
        first.send(signal.SIGKILL)
        first.wait()
    assert (job(quick).result, job(quick).attempts, job(quick).snoozes) == (3, 1, 3)
    assert (job(zero).result, job(zero).attempts, job(zero).snoozes) == (5, 1, 5)
    assert [a.outcome for a in q.attempts(zero)] == ["snoozed"] * 5 + ["done"]
    assert job(slow).status is JobState.PENDING and job(slow).lease_owner is None
    with WorkerProcess("--poll-interval", "600", **env):
        eventually(lambda: job(slow).status is JobState.DONE, timeout=20, what="slow doze")
    assert (job(slow).result, job(slow).attempts) == (1, 1)
    events = [(n["id"], n["event"]) for n in runs(notes)]
    assert events.count((slow, "end")) == 1 and events.count((quick, "end")) == 1
    assert events.count((quick, "snooze")) == 3 and events.count((slow, "snooze")) == 1
    q.close()
