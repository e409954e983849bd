"""The lean paths tickq takes for speed agree with the general ones they stand in for.

Performance itself is measured by ``bench/run.py``, never asserted here: these tests check
behaviour (what a shortcut computes, what a cold import loads), not timings.
"""

from __future__ import annotations

import functools
import inspect
import json
import pickle
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

import tickq
from conftest import tickq_env
from tickq import Job, JobContext, JobState, Queue
from tickq.schedule import DEFAULT_MAX_CATCH_UP
from tickq.signature import _inspected, is_async, parameters
from tickq.store import queries


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
    heavy = {"typing", "dataclasses", "inspect", "logging", "urllib.parse", "tickq.schedule",
             "tickq.workflow.context", "tickq.payload_codecs", "tickq.payload_shapes"}  # fmt: skip
    assert not heavy & loaded, f"loaded on import: {sorted(heavy & loaded)}"


COLD_APP = """
from tickq import Queue

q = Queue()  # $TICKQ_DATABASE_URL


@q.job()
def send(to: str, copies: int = 1) -> None:
    assert (to, copies) == ("ada", 1)
"""

COLD_TICK = """
import sys

from tickq.cli import main

code = main(["tick", "coldapp:q"])
print("loaded:", " ".join(sorted(sys.modules)), file=sys.stderr)
sys.exit(code)
"""


def test_a_cold_tick_loads_no_typing_workflow_context_or_payload_codecs(tmp_path: Path) -> None:
    # A sleeping host starts `tickq tick` on every wake-up: what it runs (a plain job, the
    # CLI, the store) must not pull in what only other features use.
    url = f"sqlite:///{tmp_path}/cold.db"
    q = Queue(url, strict=False)  # the job is the app's
    q.migrate()
    q.enqueue("send", {"to": "ada"})
    q.close()
    (tmp_path / "coldapp.py").write_text(COLD_APP)
    done = subprocess.run(
        [sys.executable, "-c", COLD_TICK], cwd=tmp_path, env=tickq_env(TICKQ_DATABASE_URL=url),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["jobs"]["succeeded"] == 1, done.stdout
    loaded = set(done.stderr.rpartition("loaded: ")[2].split())
    assert {"tickq.tick", "tickq.store.sqlite", "coldapp"} <= loaded, done.stderr
    lean = {"typing", "traceback", "tickq.workflow.context", "tickq.payload_codecs",
            "tickq.payload_shapes"}  # fmt: skip
    assert not lean & loaded, f"loaded by a cold tick: {sorted(lean & loaded)}"


def test_lazy_public_names_still_import(tmp_path: Path) -> None:
    code = (
        "import tickq; assert set(tickq.__all__) <= set(dir(tickq)); "
        "from tickq import *; from tickq import WorkflowContext; "
        "from tickq.workflow.context import WorkflowContext as W; "
        "assert WorkflowContext is W is tickq.WorkflowContext"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=tickq_env(), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        tickq.Nope  # noqa: B018


def _written_out(sql: str, paramstyle: str) -> str:
    """``format_query`` the long way, as it was before its texts were built once: every
    placeholder's text computed again for each statement."""
    sql = sql.replace("{job_columns_j}", queries.column_list(queries.JOB_COLUMNS, "j."))
    sql = sql.replace("{job_columns}", queries.column_list(queries.JOB_COLUMNS))
    sql = sql.replace("{claimed_columns}", queries.column_list(queries.CLAIMED_COLUMNS))
    sql = sql.replace("{duration_bucket}", queries.duration_bucket_sql())
    sql = sql.replace("{rescued_status}", queries.rescued_status_sql())
    sql = sql.replace("{out_of_attempts}", queries.OUT_OF_ATTEMPTS)
    sql = re.sub(r"\{of_job:(\w+):(\w+)\}", queries._of_job, sql)
    for placeholder, text in [
        ("{asked_to_stop}", queries.ASKED_TO_STOP), ("{stop_error}", queries.STOP_ERROR),
        ("{expired_error}", queries.EXPIRED_ERROR), ("{refund_error}", queries.REFUND_ERROR),
        ("{holders_back}", queries.HOLDERS_BACK), ("{wake_horizon}", str(queries.WAKE_HORIZON)),
    ]:  # fmt: skip
        sql = sql.replace(placeholder, text)
    if paramstyle == "pyformat":
        sql = re.sub(r"(?<![:\w]):(\w+)", r"%(\1)s", sql.replace("%", "%%"))
    return sql


def _read_the_long_way(files: list[str], paramstyle: str) -> dict[str, str]:
    found = {}
    for file in files:
        text = (Path(queries.SQL_DIR) / f"{file}.sql").read_text(encoding="utf-8")
        for section in text.split("-- name: ")[1:]:
            name, _, body = section.partition("\n")
            lines = [ln for ln in body.splitlines() if not ln.lstrip().startswith("--")]
            found[name.strip()] = _written_out("\n".join(lines).strip(), paramstyle)
    return found


@pytest.mark.parametrize("paramstyle", ["named", "pyformat"])
@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_the_sql_built_once_per_process_is_the_text_built_per_store(
    dialect: str, paramstyle: str
) -> None:
    raw = _read_the_long_way(
        ["common", dialect, f"workflows_{dialect}", f"retention_{dialect}"], paramstyle
    )
    expected = queries.include_fragments(raw, raw)
    first, second = (queries.load_queries(dialect, paramstyle) for _ in range(2))
    assert first == expected and second == expected and len(expected) > 100
    first["claim"] = "changed by one store"  # a store adds to its own dict; no other sees it
    first["browse_active_counts"] = "added by one store"
    assert queries.load_queries(dialect, paramstyle) == expected
    browse_raw = _read_the_long_way(["common", f"browse_{dialect}"], paramstyle)
    assert queries.load_queries(f"browse_{dialect}", paramstyle, second) == (
        queries.include_fragments(browse_raw, second)
    )


def test_two_queues_in_one_process_hold_equal_sql_of_their_own(tmp_path: Path) -> None:
    one, two = Queue(f"sqlite:///{tmp_path}/one.db"), Queue(f"sqlite:///{tmp_path}/two.db")
    sql_one, sql_two = one._runtime.store._sql, two._runtime.store._sql  # type: ignore[attr-defined]
    assert sql_one == sql_two and sql_one is not sql_two and "finish:retried" in sql_one


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
