"""The lean paths tickq takes for speed agree with the general ones they stand in for.

Performance itself is measured by ``bench/run.py``, never asserted here: these tests check
behaviour (what a shortcut computes, what a cold import loads), not timings.
"""

from __future__ import annotations

import functools
import inspect
import pickle
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from conftest import tickq_env
from tickq import Job, JobContext, JobState, Queue
from tickq.schedule import DEFAULT_MAX_CATCH_UP
from tickq.signature import _inspected, is_async, parameters


def _plain(a, b: int, /, c, d=1, *args, e, f: JobContext = None, **kw): ...  # type: ignore[no-untyped-def]
def _kwonly(*, x: int, y: str = "") -> None: ...
def _defaults(a, b=2, c=3) -> None: ...
def _stars(*items, **options) -> None: ...
def _nothing() -> None: ...
async def _coroutine(n: int, ctx: JobContext) -> None: ...
def _stringly(ctx: "JobContext", n: "int") -> None: ...  # noqa: UP037


@pytest.mark.parametrize(
    "fn", [_plain, _kwonly, _defaults, _stars, _nothing, _coroutine, _stringly, lambda x, y=1: x]
)
def test_a_plain_function_reads_as_inspect_reads_it(fn: object) -> None:
    assert parameters(fn) == _inspected(fn)  # type: ignore[arg-type]
    assert is_async(fn) == inspect.iscoroutinefunction(fn)  # type: ignore[arg-type]


def test_wrapped_and_partial_functions_go_through_inspect() -> None:
    @functools.wraps(_kwonly)
    def wrapper(*args: object, **kwargs: object) -> None: ...

    assert parameters(wrapper) == _inspected(_kwonly)
    assert parameters(functools.partial(_defaults, 1)) == [
        ("b", "named", True, None), ("c", "named", True, None)
    ]  # fmt: skip


def test_payload_checks_and_context_still_follow_the_signature(tmp_path: object) -> None:
    q = Queue(f"sqlite:///{tmp_path}/lean.db")

    @q.job()
    def greet(ctx: JobContext, name: str, *, loud: bool = False) -> None: ...

    definition = q._definition("greet")
    assert definition is not None
    assert (definition.context_param, definition.accepted, definition.required) == (
        "ctx", frozenset({"name", "loud"}), frozenset({"name"})
    )  # fmt: skip
    with pytest.raises(TypeError, match=r"unexpected 'shout'; missing 'name'"):
        greet.enqueue(shout=True)


def test_queue_schedule_defaults_to_the_schedule_default_catch_up() -> None:
    assert inspect.signature(Queue.schedule).parameters["max_catch_up"].default == (
        DEFAULT_MAX_CATCH_UP
    )


def test_a_job_is_a_read_only_record() -> None:
    now = datetime.now(UTC)
    job = Job(7, "send", "default", {"to": 1}, JobState.PENDING, 0, 0, 4, now, None, None,
              now, now)  # fmt: skip
    assert job.meta == {} and job.lease_owner is None and job.status == "pending"
    with pytest.raises(AttributeError):
        job.attempts = 2  # type: ignore[misc]
    assert job == pickle.loads(pickle.dumps(job))
    assert repr(job).startswith("Job(id=7, type='send', queue='default', payload={'to': 1},")
    assert job._replace(attempts=1).attempts == 1 and job.attempts == 0
    assert job.to_dict()["run_after"] == now.isoformat()


def test_importing_tickq_loads_nothing_a_waking_host_does_not_need(tmp_path: object) -> None:
    # typing, dataclasses, inspect, logging and urllib each cost a cold start milliseconds;
    # they load when a feature needs them, not on `import tickq` + Queue(sqlite URL).
    code = (
        "import sys; import tickq; tickq.Queue('sqlite:///" + f"{tmp_path}/cold.db'); "
        "print(' '.join(sorted(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=tickq_env(), capture_output=True, text=True, timeout=60
    )
    loaded = set(done.stdout.split())
    assert "tickq.queue" in loaded, done.stderr
    heavy = {"typing", "dataclasses", "inspect", "logging", "urllib.parse", "tickq.schedule"}
    assert not heavy & loaded, f"loaded on import: {sorted(heavy & loaded)}"


def test_lines_held_in_a_batch_are_written_together_and_in_order() -> None:
    import io
    import logging

    from tickq.logfmt import HOLDERS, StderrHandler, TextFormatter
    from tickq.logger import held_lines

    stream = io.StringIO()
    handler = StderrHandler(stream)
    handler.setFormatter(TextFormatter())
    logger = logging.getLogger("tickq.test_held")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    HOLDERS.append(handler)
    try:
        logger.info("before")
        with held_lines():
            logger.info("one")
            logger.warning("two")
            assert stream.getvalue().count("\n") == 1, "held until the block ends"
        logger.info("after")
    finally:
        HOLDERS.remove(handler)
        logger.removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert [ln.rsplit(": ", 1)[1] for ln in lines] == ["before", "one", "two", "after"]
    assert lines[2].split()[2] == "WARNING" and lines[0][:2] == "20"


def test_array_literals_reach_postgres_unchanged(pg_schema_url: str) -> None:
    import psycopg

    from tickq.store.postgres import number_array, text_array

    texts = ['{"a":"b\\"c","d":[1,2]}', "NULL", "", None, "back\\slash", 'q"uote', "a,b}{",
             "line\nbreak", "tab\tand ünïcödé", " padded "]  # fmt: skip
    numbers = [1, -2, 3.5, 1e-05, 123456789012]
    with psycopg.connect(pg_schema_url, autocommit=True) as conn:
        got_texts, got_numbers = conn.execute(
            "SELECT CAST(%s AS text[]), CAST(%s AS float8[])",
            (text_array(texts), number_array(numbers)),
        ).fetchone()
    assert got_texts == texts and got_numbers == [float(n) for n in numbers]
