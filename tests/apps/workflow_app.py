"""A tickq app for the workflow crash tests: ``python -m tickq worker apps.workflow_app:q``.

Set by the environment: ``TICKQ_DATABASE_URL``; ``TICKQ_TEST_LEASE`` (lease seconds);
``TICKQ_TEST_LEDGER`` (a folder: every side effect is a line there, one file per process,
written before the step returns); ``TICKQ_TEST_HANG`` (a folder: a step or a replay named
by a file there, e.g. ``effect-b`` or ``replay-after-a``, hangs in this process until it
is killed, having noted ``hang`` in the ledger).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tickq import JobContext, Queue, WorkflowContext

q = Queue(lease_seconds=float(os.environ.get("TICKQ_TEST_LEASE", "60")))


def note(event: str, name: str, job_id: int = 0, attempt: int = 0) -> None:
    folder = os.environ["TICKQ_TEST_LEDGER"]
    line = {"event": event, "name": name, "job": job_id, "attempt": attempt, "pid": os.getpid()}
    with open(Path(folder) / f"{os.getpid()}.jsonl", "a") as f:
        f.write(json.dumps(line) + "\n")


def hang_if_asked(name: str) -> None:
    folder = os.environ.get("TICKQ_TEST_HANG")
    if folder and (Path(folder) / name).exists():
        (Path(folder) / name).unlink()  # once: the process that takes over goes on
        note("hang", name)
        time.sleep(600)


@q.job(max_attempts=5)
def effect(ctx: JobContext, name: str, seconds: float = 0.0) -> str:
    hang_if_asked(f"effect-{name}")
    time.sleep(seconds)
    note("effect", name, ctx.id, ctx.attempt)
    return name


@q.workflow()
def chain(wf: WorkflowContext, names: list[str]) -> list[str]:
    done = []
    for name in names:
        done.append(wf.run(effect, name=name))
        hang_if_asked(f"replay-after-{name}")
    return done


@q.workflow()
def fan(wf: WorkflowContext, names: list[str], seconds: float = 0.0) -> list[str]:
    results = wf.gather([wf.start(effect, name=n, seconds=seconds) for n in names])
    wf.run(effect, name="merged")
    return list(results)


@q.workflow()
def mixed(wf: WorkflowContext, key: str) -> str:
    wf.gather([wf.start(effect, name=f"{key}-{i}", seconds=0.02) for i in range(4)])
    wf.sleep(0.3)
    got = wf.wait_for("go", key=key, timeout=60)
    wf.run(effect, name=f"{key}-last")
    return f"{key}:{got}"
