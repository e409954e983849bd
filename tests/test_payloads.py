# ruff: noqa: UP006, UP007, UP035, UP037, UP045 (the old typing spellings are under test)
"""Payloads and options: what enqueue accepts arrives exactly, what it refuses is named, and a
row that can't be decoded or run (written by hand, by an older version) fails alone."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta
from enum import IntEnum
from typing import Any, List, Literal, Optional, Union

import pytest

from tickq import ConfigurationError, JobContext, JobState, Queue
from tickq.hints import compile_note
from tickq.payload import MAX_DEPTH


def raw_sql(q: Queue, sql: str, *params: Any) -> None:
    """Run SQL on tickq's own (autocommit) connection; ``?`` placeholders on both backends."""
    if q._store.dialect == "postgres":
        sql = sql.replace("?", "%s")
    q._store._connection().execute(sql, params)


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.fixture
def received(queue: Queue) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []

    @queue.job()
    def echo(**kwargs: Any) -> None:
        got.append(kwargs)

    @queue.job()
    def innocent(n: int) -> None:
        got.append({"innocent": n})

    return got


# -- rows that can't be decoded or run -----------------------------------------------------
POISON_PAYLOADS = {
    "too deep to decode": '{"a":' + "[" * 998 + "]" * 998 + "}",  # SQLite's JSON limit is 1000
    "a JSON array": "[1, 2]",
    "a JSON string": '"x"',
    "JSON null": "null",
    "a JSON number": "5",
}


@pytest.mark.parametrize("text", POISON_PAYLOADS.values(), ids=POISON_PAYLOADS.keys())
def test_a_stored_payload_that_cannot_be_decoded_fails_alone(
    queue: Queue, received: list[dict[str, Any]], text: str
) -> None:
    innocent = queue.enqueue("innocent", {"n": 1})
    raw_sql(queue, "UPDATE tickq_jobs SET payload = ? WHERE id = ?", text, queue.enqueue("echo"))
    later = queue.enqueue("innocent", {"n": 2})
    report = queue.process_jobs(limit=10)
    assert received == [{"innocent": 1}, {"innocent": 2}]
    assert report["failed"] == 1 and report["succeeded"] == 2
    bad = queue.list_jobs(status=JobState.FAILED)
    assert len(bad) == 1 and bad[0].attempts == 1, "failed at once, not retried"
    assert "UnrunnableJob: stored payload" in (bad[0].last_error or "")
    assert {queue.get_job(i).status for i in (innocent, later)} == {JobState.DONE}  # type: ignore[union-attr]
    assert queue.process_jobs()["claimed"] == 0


@pytest.mark.parametrize("column", ["priority", "max_attempts"])
def test_a_bad_stored_option_fails_its_job_alone(
    queue: Queue, received: list[dict[str, Any]], column: str
) -> None:
    queue.enqueue("innocent", {"n": 1})
    bad = queue.enqueue("echo", {"a": 1})
    if queue._store.dialect == "postgres":  # its INTEGER column can't hold the text at all
        with pytest.raises(Exception, match="invalid input syntax for type integer"):
            raw_sql(queue, f"UPDATE tickq_jobs SET {column} = 'x' WHERE id = ?", bad)
        return
    raw_sql(queue, f"UPDATE tickq_jobs SET {column} = 'x' WHERE id = ?", bad)
    report = queue.tick()
    assert received == [{"innocent": 1}]
    assert report["jobs"]["failed"] == 1 and report["jobs"]["succeeded"] == 1
    job = queue.get_job(bad)
    assert job is not None and job.status == JobState.FAILED
    assert f"stored {column} 'x' is not an integer" in (job.last_error or "")


def test_a_payload_stored_as_a_number_fails_alone(
    queue: Queue, received: list[dict[str, Any]]
) -> None:
    bad = queue.enqueue("echo")
    if queue._store.dialect == "postgres":  # a json column takes no integer
        with pytest.raises(Exception, match="is of type json but expression is of type integer"):
            raw_sql(queue, "UPDATE tickq_jobs SET payload = 5 WHERE id = ?", bad)
        return
    raw_sql(queue, "UPDATE tickq_jobs SET payload = 5 WHERE id = ?", bad)
    queue.enqueue("innocent", {"n": 1})
    assert queue.process_jobs()["succeeded"] == 1
    job = queue.get_job(bad)
    assert job is not None and job.status == JobState.FAILED
    assert "stored payload is a JSON number, not an object" in (job.last_error or "")


def test_a_payload_that_no_longer_fits_the_function_fails_without_retry(
    queue: Queue, received: list[dict[str, Any]]
) -> None:
    bad = queue.enqueue("innocent", {"n": 1})
    raw_sql(queue, """UPDATE tickq_jobs SET payload = '{"count": 1}' WHERE id = ?""", bad)
    good = queue.enqueue("innocent", {"n": 2})
    queue.process_jobs()
    job = queue.get_job(bad)
    assert job is not None and job.status == JobState.FAILED and job.attempts == 1
    assert job.last_error and job.last_error.startswith("UnrunnableJob: payload does not fit")
    assert "innocent(n: 'int')" in job.last_error
    assert "unexpected 'count'; missing 'n'" in job.last_error
    assert queue.get_job(good).status == JobState.DONE  # type: ignore[union-attr]


def test_jobs_that_cannot_run_fail_alone_in_the_worker(
    queue: Queue, received: list[dict[str, Any]]
) -> None:
    ran: list[int] = []

    @queue.job()
    async def ping(n: int) -> None:
        ran.append(n)

    good = queue.enqueue("ping", {"n": 1})
    deep = queue.enqueue("ping", {"n": 2})
    wrong = queue.enqueue("ping", {"n": 3})
    sync_good = queue.enqueue("innocent", {"n": 4})
    sync_bad = queue.enqueue("innocent", {"n": 5})
    raw_sql(queue, "UPDATE tickq_jobs SET payload = '[5]' WHERE id = ?", sync_bad)
    raw_sql(queue, "UPDATE tickq_jobs SET payload = ? WHERE id = ?",
            POISON_PAYLOADS["too deep to decode"], deep)  # fmt: skip
    raw_sql(queue, """UPDATE tickq_jobs SET payload = '{"m": 1}' WHERE id = ?""", wrong)
    stop, errors = threading.Event(), []

    def work() -> None:
        try:
            queue.run_worker(poll_interval=0.05, stop=stop)
        except BaseException as exc:  # pragma: no cover - the failure being tested
            errors.append(exc)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    try:
        for _ in range(400):
            if all(queue.get_job(i).finished_at for i in (good, deep, wrong, sync_good, sync_bad)):  # type: ignore[union-attr]
                break
            stop.wait(0.05)
    finally:
        stop.set()
        thread.join(30)
    assert not errors and not thread.is_alive()
    assert ran == [1] and received == [{"innocent": 4}]
    statuses = [queue.get_job(i).status for i in (good, deep, wrong, sync_good, sync_bad)]  # type: ignore[union-attr]
    assert statuses == ["done", "failed", "failed", "done", "failed"]


def test_reading_an_unreadable_row_does_not_raise(
    queue: Queue, received: list[dict[str, Any]]
) -> None:
    raw_sql(queue, "UPDATE tickq_jobs SET payload = '[1]' WHERE id = ?", queue.enqueue("echo"))
    (job,) = queue.list_jobs()
    assert job.payload == {} and "JSON array" in job.payload.reason  # type: ignore[attr-defined]


# -- what enqueue refuses --------------------------------------------------------------------
BAD_OPTIONS = [
    ({"priority": "x"}, TypeError, "priority must be an int, got str"),
    ({"priority": 1.5}, TypeError, "priority must be an int, got float"),
    ({"priority": True}, TypeError, "priority must be an int, got bool"),
    ({"priority": 10**30}, ValueError, "priority must be <= 2147483647"),
    ({"priority": -(2**31) - 1}, ValueError, "priority must be >= -2147483648"),
    ({"max_attempts": 0}, ValueError, "max_attempts must be >= 1, got 0"),
    ({"max_attempts": "x"}, TypeError, "max_attempts must be an int, got str"),
    ({"max_attempts": 2**31}, ValueError, "max_attempts must be <= 2147483647"),
    ({"max_attempts": False}, TypeError, "max_attempts must be an int, got bool"),
    ({"queue": ""}, ValueError, "queue must be a non-empty name"),
    ({"queue": 5}, TypeError, "queue must be a str, got int"),
    ({"queue": "a\x00b"}, ValueError, "queue 'a\\\\x00b' contains a NUL"),
    ({"queue": "\ud800"}, ValueError, "queue .* lone surrogate"),
    ({"unique_key": 5}, TypeError, "unique_key must be a str, got int"),
    ({"unique_key": "k\x00"}, ValueError, "unique_key .* NUL"),
    ({"unique_scope": "some"}, ValueError, "unique_scope must be 'active' or 'all'"),
    ({"unique_scope": ["all"]}, ValueError, "unique_scope must be 'active' or 'all'"),
    ({"run_after": "tomorrow"}, TypeError, "run_after must be a datetime or timedelta"),
    ({"run_after": datetime(2030, 1, 1)}, ValueError, "timezone-aware"),
    ({"run_after": timedelta.max}, ValueError, "run_after .* past the year 9999"),
]


@pytest.mark.parametrize(("options", "error", "message"), BAD_OPTIONS)
def test_bad_options_are_refused_naming_the_option(
    queue: Queue, received: list[dict[str, Any]], options: dict[str, Any],
    error: type[Exception], message: str,
) -> None:  # fmt: skip
    with pytest.raises(error, match=message):
        queue.enqueue("innocent", {"n": 1}, **options)
    assert queue.stats()["by_status"]["pending"] == 0


def test_job_decorator_options_are_checked_the_same_way(queue: Queue) -> None:
    with pytest.raises(TypeError, match="priority must be an int, got str"):
        queue.job(priority="high")  # type: ignore[call-overload]
    with pytest.raises(ConfigurationError, match="max_attempts must be >= 1"):
        queue.job(max_attempts=0)
    with pytest.raises(TypeError, match="queue must be a str"):
        queue.job(queue=None)  # type: ignore[call-overload]


def test_explicit_options_are_stored_as_given(queue: Queue, received: list[dict[str, Any]]) -> None:
    job_id = queue.enqueue("innocent", {"n": 1}, priority=-(2**31), max_attempts=1, queue="q")
    job = queue.get_job(job_id)
    assert job is not None and (job.priority, job.max_attempts, job.queue) == (-(2**31), 1, "q")


class Colour(IntEnum):
    RED = 1


BAD_PAYLOADS = [
    ({"a": {"b": [0, 1, 2, {"c": datetime(2030, 1, 1)}]}},
     r"payload\['a'\]\['b'\]\[3\]\['c'\] of job 'echo' is not JSON-serialisable .*datetime"),
    ({"a": (1, 2)}, r"payload\['a'\] .* \(tuple: \(1, 2\)\); pass a list"),
    ({"a": {1: "x", "1": "y"}}, r"payload\['a'\] of job 'echo' has a key of type int \(1\)"),
    ({"a": float("inf")}, r"payload\['a'\] .* is inf"),
    ({"a": [float("nan")]}, r"payload\['a'\]\[0\] .* is nan"),
    ({"a": Colour.RED}, r"payload\['a'\] .*Colour.*pass value.value"),
    ({"a": b"x"}, r"payload\['a'\] .*bytes"),
    ({"a": 10**5000}, r"payload\['a'\] .* more than 4300 digits"),
    ({"a": nested(MAX_DEPTH)}, r"nests deeper than 100 levels"),
    ({"a": ["ok", "x\ud800\udc00"]},
     r"payload\['a'\]\[1\] .* surrogate pair as two characters \('\\ud800\\udc00' at index 1\)"),
    ({"a": {"\udbff\udfff": 1}}, r"payload\['a'\] .* has a key '\\udbff\\udfff' that holds"),
]  # fmt: skip


@pytest.mark.parametrize(("payload", "message"), BAD_PAYLOADS)
def test_bad_payloads_are_refused_naming_the_field(
    queue: Queue, received: list[dict[str, Any]], payload: dict[str, Any], message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        queue.enqueue("echo", payload)
    with pytest.raises(TypeError, match=message):  # its quick path for plain payloads too
        queue.enqueue_many([("echo", {"fine": 1}), ("echo", payload)])
    assert queue.stats()["by_status"]["pending"] == 0


def test_the_deepest_accepted_payload_runs(queue: Queue, received: list[dict[str, Any]]) -> None:
    deepest = {"a": nested(MAX_DEPTH - 2)}  # the payload dict, then 99 lists
    queue.enqueue("echo", deepest)
    queue.process_jobs()
    assert received == [deepest]


def test_a_context_key_is_refused_for_a_kwargs_job(queue: Queue) -> None:
    @queue.job()
    def loose(ctx: JobContext, **kwargs: Any) -> None: ...

    with pytest.raises(TypeError, match="'ctx' is the name of its JobContext parameter"):
        loose.enqueue(ctx=1, other=2)


# -- exact round trip --------------------------------------------------------------------------
EXACT = {
    "neg_zero": -0.0, "big_float": 1e16, "tiny": 5e-324, "big_int": 2**70, "neg": -(2**63),
    "nul": "a\x00b", "surrogate": "\ud800", "low_then_high": "\udc00\ud800",
    "emoji": "\U0001f600", "empty": {}, "list": [],
    "z": 1, "a": 2, "nested": {"b": 1, "a": [True, False, None, 1.0, 1]}, "": "empty key",
    "ключ": "значение", "with space": "x", "with'quote": '"',
}  # fmt: skip


def test_a_job_receives_exactly_what_was_enqueued(
    queue: Queue, received: list[dict[str, Any]]
) -> None:
    queue.enqueue("echo", EXACT)
    queue.process_jobs()
    (got,) = received
    assert json.dumps(got) == json.dumps(EXACT), "same keys in the same order"
    assert repr(got) == repr(EXACT), "same types and values (-0.0, 1e16 stay floats)"


# -- annotations and signatures (issue 19 item 8) ---------------------------------------------
def test_values_that_do_not_fit_simple_annotations_are_refused(queue: Queue) -> None:
    @queue.job()
    def typed(
        a: int,
        b: float = 0.0,
        c: Optional[str] = None,
        d: list[int] | None = None,
        e: "dict[str, bool] | None" = None,
        f: Any = None,
        g: "Unknown" = None,  # type: ignore[name-defined] # noqa: F821
    ) -> None: ...  # fmt: skip

    typed.enqueue(a=1, b=2, c=None, d=[1, 2], e={"x": True}, f="any", g=[1])
    refused = [({"a": "1"}, "payload['a'] is str '1', not int"),
               ({"a": True}, "payload['a'] is bool True, not int"),
               ({"a": 1, "b": "2"}, "payload['b'] is str '2', not float"),
               ({"a": 1, "c": 3}, "payload['c'] is int 3, not Optional[str]"),
               ({"a": 1, "d": [1, "2"]}, "not list[int] | None"),
               ({"a": 1, "e": {"x": 1}}, "not dict[str, bool] | None")]  # fmt: skip
    for payload, message in refused:
        with pytest.raises(TypeError, match=r"does not fit job 'typed'\(a: 'int'.*: ") as info:
            queue.enqueue("typed", payload)
        assert message in str(info.value)
    assert queue.stats()["by_status"]["pending"] == 1


NOTES = [
    (int, 1, True), (int, True, False), (int, "1", False), (float, 1, True), (float, "1", False),
    (bool, 1, False), (str, "x", True), (type(None), None, True), (None, 0, False),
    (list, [1], True), (dict, [], False), (list[int], [1, "2"], False),
    (dict[str, int], {"a": 1}, True), (dict[str, int], {"a": "1"}, False),
    (int | None, None, True), (Optional[str], 3, False), (Union[int, str], "a", True),
    (List[int], ["x"], False), (Any, object(), True), (Literal[1], 2, True),
    ("int", "1", False), ("float | None", None, True), ("typing.Optional[int]", "x", False),
    ("list[dict[str, int]]", [{"a": "b"}], False), ("Union[int, str]", 1.5, False),
    ("MyModel", object(), True), ("list[MyModel]", 3, False), ("Optional[MyModel]", 3, True),
    ("int]", "x", True), ("Callable[[int], str]", 1, True),
]  # fmt: skip


@pytest.mark.parametrize(("note", "value", "fits"), NOTES)
def test_simple_annotations_are_checked_and_others_accepted(
    note: Any, value: Any, fits: bool
) -> None:
    check = compile_note(note)
    assert (check is None or check(value)) is fits


def test_migration_5_keeps_jsonb_payloads_of_an_existing_postgres_database(
    pg_schema_url: str,
) -> None:
    from tickq.store.migrate import migrate
    from tickq.store.queries import migrations

    q = Queue(pg_schema_url)
    migrate(q._store, migrations("postgres")[:4])
    raw_sql(
        q, """INSERT INTO tickq_jobs (type, payload) VALUES ('echo', '{"b": 1, "a": [-0.0]}')"""
    )
    assert 5 in q.migrate()  # and any later migrations
    got: list[dict[str, Any]] = []
    q.job(name="echo")(lambda **kwargs: got.append(kwargs))
    q.enqueue("echo", {"b": 1, "a": [-0.0, 1e16]})
    q.process_jobs()
    # what jsonb normalised before the upgrade stays so; jobs enqueued after arrive exactly
    assert [repr(g) for g in got] == ["{'a': [0.0], 'b': 1}", "{'b': 1, 'a': [-0.0, 1e+16]}"]
    q.close()
