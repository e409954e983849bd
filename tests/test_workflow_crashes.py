"""Workflows survive kill -9 of real worker processes: mid-step, between a step's end and
the run's resumption, mid-gather; every run completes, and each side effect (the ledger)
happens once apart from the reruns a crash causes, which are recorded as extra attempts.
A gather of 20 steps spreads across 3 worker processes; with a worker, the next step
starts within milliseconds of the last one's end."""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from tickq import Queue
from workerproc import WorkerProcess, eventually, runs

APP = "apps.workflow_app:q"


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    folder = tmp_path / "ledger"
    folder.mkdir()
    return folder


@pytest.fixture
def hang(tmp_path: Path) -> Path:
    folder = tmp_path / "hang"
    folder.mkdir()
    return folder


@pytest.fixture
def app(db_url: str, ledger: Path, hang: Path) -> Iterator[tuple[Any, dict[str, str]]]:
    import apps.workflow_app as module

    env = {"TICKQ_DATABASE_URL": db_url, "TICKQ_TEST_LEDGER": str(ledger),
           "TICKQ_TEST_HANG": str(hang), "TICKQ_TEST_LEASE": "3"}  # fmt: skip
    q = Queue(db_url)
    q.migrate()
    # The test starts runs through the app's own workflow functions, on this queue's URL.
    module.q._runtime.store = q._runtime.store
    yield module, env
    q.close()


def worker(env: dict[str, str], *args: str) -> WorkerProcess:
    return WorkerProcess("--poll-interval", "0.2", *args, app=APP, **env)


def effects(ledger: Path) -> Counter[str]:
    return Counter(n["name"] for n in runs(ledger) if n["event"] == "effect")


def done(module: Any, run_id: int) -> bool:
    status = module.q.workflow_run(run_id).status
    assert status not in ("failed", "cancelled"), module.q.workflow_run(run_id)
    return bool(status == "done")


def kill(w: WorkerProcess) -> None:
    w.send(signal.SIGKILL)
    assert w.wait() == -signal.SIGKILL


def stop(w: WorkerProcess) -> None:
    w.send(signal.SIGTERM)
    assert w.wait() == 0, w.output


def hung(ledger: Path, name: str) -> bool:
    return any(n["event"] == "hang" and n["name"] == name for n in runs(ledger))


def test_kill_mid_step(app: tuple[Any, dict[str, str]], ledger: Path, hang: Path) -> None:
    module, env = app
    (hang / "effect-b").touch()
    run_id = module.chain.start(names=["a", "b", "c"])
    with worker(env) as w:
        eventually(lambda: hung(ledger, "effect-b"), what="step b to start")
        kill(w)
    with worker(env) as w:
        eventually(lambda: done(module, run_id), timeout=40, what="the run to complete")
        stop(w)
    run = module.q.workflow_run(run_id)
    assert run.result == ["a", "b", "c"]
    assert effects(ledger) == Counter(a=1, b=1, c=1)  # b's killed run had no effect yet
    # The crash rerun is on record: an extra attempt, or a refunded run when it died
    # before its start was confirmed.
    assert [len(module.q.attempts(s.job_id)) for s in run.steps] == [1, 2, 1]


def test_kill_between_a_step_end_and_the_resumption(
    app: tuple[Any, dict[str, str]], ledger: Path, hang: Path
) -> None:
    module, env = app
    (hang / "replay-after-a").touch()  # the replay that saw a's end hangs before going on
    run_id = module.chain.start(names=["a", "b"])
    with worker(env) as w:
        eventually(lambda: hung(ledger, "replay-after-a"), what="the replay after a")
        kill(w)
    with worker(env) as w:
        eventually(lambda: done(module, run_id), timeout=40, what="the run to complete")
        stop(w)
    assert module.q.workflow_run(run_id).result == ["a", "b"]
    assert effects(ledger) == Counter(a=1, b=1)  # a's result was recorded: never rerun
    # The driver's crashed replay is on record (refunded: it died before confirming its
    # start, or lease_expired).
    outcomes = [a.outcome for a in module.q.attempts(run_id)]
    assert {"refunded", "lease_expired"} & set(outcomes), outcomes


def test_kill_mid_gather(app: tuple[Any, dict[str, str]], ledger: Path, hang: Path) -> None:
    module, env = app
    names = [f"n{i}" for i in range(6)]
    (hang / "effect-n3").touch()
    run_id = module.fan.start(names=names, seconds=0.05)
    with worker(env, "--concurrency", "2") as w:
        eventually(lambda: hung(ledger, "effect-n3"), what="step n3 to start")
        kill(w)
    with worker(env) as w:
        eventually(lambda: done(module, run_id), timeout=40, what="the run to complete")
        stop(w)
    run = module.q.workflow_run(run_id)
    assert run.result == names
    counted = effects(ledger)
    assert set(counted) == {*names, "merged"}
    # A step may have run again only if the kill cut it short: each such rerun is an
    # extra attempt on record.
    for step in run.steps:
        assert counted[step.result] <= len(module.q.attempts(step.job_id)), (step, counted)
    assert counted["n3"] == 1 and len(module.q.attempts(run.steps[3].job_id)) == 2


def test_a_gather_of_20_steps_across_3_worker_processes(
    app: tuple[Any, dict[str, str]], ledger: Path, backend: str
) -> None:
    module, env = app
    names = [f"s{i}" for i in range(20)]
    workers = [worker(env, "--concurrency", "2") for _ in range(3)]
    for w in workers:  # all three up before the run starts: each can take its share
        w.wait_for_line("listening for enqueues")
    run_id = module.fan.start(names=names, seconds=0.2)
    try:
        eventually(lambda: done(module, run_id), timeout=60, what="the run to complete")
    except AssertionError:
        run = module.q.workflow_run(run_id)
        driver = module.q.get_job(run_id)
        logs = "\n\n".join(w.output[-3000:] for w in workers)
        raise AssertionError(f"{run}\n{driver}\n{logs}") from None
    finally:
        for w in workers:
            stop(w)
    assert module.q.workflow_run(run_id).result == names
    notes = [n for n in runs(ledger) if n["event"] == "effect"]
    assert Counter(n["name"] for n in notes) == Counter({**dict.fromkeys(names, 1), "merged": 1})
    assert len({n["pid"] for n in notes}) >= 2, "the steps all ran in one process"


def test_with_a_worker_the_next_step_follows_a_step_end_within_milliseconds(
    app: tuple[Any, dict[str, str]], backend: str
) -> None:
    module, env = app
    with WorkerProcess(app=APP, **env) as w:  # default poll interval: 5 s (Postgres), 1 s
        w.wait_for_line("listening for enqueues")
        run_id = module.chain.start(names=["a", "b", "c", "d"])
        eventually(lambda: done(module, run_id), timeout=30, what="the run to complete")
        stop(w)
    jobs = [module.q.get_job(s.job_id) for s in module.q.workflow_run(run_id).steps]
    gaps = [(b.created_at - a.finished_at).total_seconds() for a, b in pairwise(jobs)]
    print(f"{backend}: step end -> next step enqueued: {[round(g * 1000, 1) for g in gaps]} ms")
    assert max(gaps) < 0.5, gaps


@pytest.mark.parametrize("point", ["effect-b", "replay-after-a"])
def test_kill_9_of_a_tick_mid_step_or_mid_replay(
    app: tuple[Any, dict[str, str]], ledger: Path, hang: Path, point: str
) -> None:
    import subprocess
    import sys
    import time

    from conftest import ROOT, tickq_env

    module, env = app
    (hang / point).touch()
    run_id = module.chain.start(names=["a", "b", "c"])

    def tick() -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "tickq", "tick", APP],
                                env=tickq_env(**env), cwd=str(ROOT), text=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip

    first = tick()
    try:
        eventually(lambda: hung(ledger, point), what=f"the tick to hang at {point}")
        first.send_signal(signal.SIGKILL)
        assert first.wait(30) == -signal.SIGKILL
    finally:
        if first.poll() is None:
            first.kill()
    deadline = time.monotonic() + 40
    while not done(module, run_id):  # scheduled ticks: the lease (3 s) runs out, then on
        assert time.monotonic() < deadline, module.q.workflow_run(run_id)
        later = tick()
        assert later.wait(30) == 0, later.stderr.read() if later.stderr else ""
        time.sleep(0.5)
    assert module.q.workflow_run(run_id).result == ["a", "b", "c"]
    assert effects(ledger) == Counter(a=1, b=1, c=1)


def test_many_runs_on_3_workers_with_events_at_random_times_all_complete(
    app: tuple[Any, dict[str, str]], ledger: Path
) -> None:
    import random
    import time

    module, env = app
    keys = [f"k{i}" for i in range(12)]
    workers = [worker(env, "--concurrency", "3") for _ in range(3)]
    try:
        for w in workers:
            w.wait_for_line("listening for enqueues")
        order = keys[:]
        random.shuffle(order)
        early = order[:4]  # sent before their runs even start
        for key in early:
            module.q.send_event("go", key=key, data=key.upper())
        runs_ = {key: module.mixed.start(key=key) for key in keys}
        for key in order[4:]:  # the others while the runs go on
            time.sleep(random.uniform(0, 0.08))
            module.q.send_event("go", key=key, data=key.upper())
        for key, run_id in runs_.items():
            eventually(lambda r=run_id: done(module, r), timeout=60, what=f"run {key}")
    finally:
        for w in workers:
            stop(w)
    for key, run_id in runs_.items():
        assert module.q.workflow_run(run_id).result == f"{key}:{key.upper()}"
    expected = {f"{k}-{i}": 1 for k in keys for i in (*range(4), "last")}
    assert effects(ledger) == Counter(expected)
