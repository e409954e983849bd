"""``@q.job(concurrency_key=...)``: the option is checked where it is declared, each job's
key is computed once, at enqueue, and stored in its row (the claim parses no payload);
a key that can't be computed is refused at enqueue, naming the job and the value."""

from __future__ import annotations

import re
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

from tickq import ConfigurationError, JobContext, Queue
from tickq.controls import Limit


@pytest.fixture
def q(tmp_path: Path) -> Queue:
    queue = Queue(f"sqlite:///{tmp_path / 'q.db'}")
    queue.migrate()
    return queue


def stored_keys(q: Queue) -> dict[int, str | None]:
    path = q._store.url.partition(":///")[2]  # type: ignore[attr-defined]
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT id, concurrency_key FROM tickq_jobs").fetchall())


def test_the_key_of_a_payload_field_is_stored_with_the_job(q: Queue) -> None:
    @q.job(concurrency=1, concurrency_key="account_id")
    def sync(account_id: str | int, full: bool = False) -> None: ...

    @q.job()
    def plain(n: int) -> None: ...

    a = sync.enqueue(account_id="acme")
    b = q.enqueue("sync", {"account_id": 42, "full": True})
    [c, d] = q.enqueue_many([("sync", {"account_id": "acme"}), ("plain", {"n": 1})])
    assert stored_keys(q) == {a: "acme", b: "42", c: "acme", d: None}
    assert q._definition("sync").limit == Limit(1, None, None, keyed=True)  # type: ignore[union-attr]


def test_the_key_of_a_function_is_what_it_returns(q: Queue) -> None:
    @q.job(rate_limit="10/s", concurrency_key=lambda p: f"{p['region']}/{p['account']}")
    def report(region: str, account: int) -> None: ...

    job_id = report.enqueue(region="eu", account=7)
    assert stored_keys(q) == {job_id: "eu/7"}


@pytest.mark.parametrize(
    ("key", "payload", "message"),
    [
        ("account_id", {"account_id": 1.5},
         "job 'sync' is limited per 'account_id' (its concurrency_key): account_id must be a "
         "str or an int, got float: 1.5"),
        ("account_id", {"account_id": True},
         "account_id must be a str or an int, got bool: True"),
        ("account_id", {"account_id": None}, "got NoneType: None"),
        ("account_id", {}, "job 'sync' is limited per 'account_id' (its concurrency_key), but "
         "the payload has no 'account_id' (keys: []); pass account_id=..."),
        (lambda p: p["missing"], {"account_id": "a"},
         "concurrency_key of job 'sync' raised KeyError: 'missing' (payload keys: "
         "['account_id'])"),
        (lambda p: 42, {"account_id": "a"},
         "concurrency_key of job 'sync' must return a str, got int: 42"),
        (lambda p: "x" * 1001, {"account_id": "a"},
         "concurrency key 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' of job 'sync' can't be "
         "stored: at most 1000 bytes"),
        ("account_id", {"account_id": "a\x00b"}, "of job 'sync' can't be stored"),
    ],
)  # fmt: skip
def test_a_key_that_cant_be_computed_is_refused_at_enqueue_naming_the_job_and_value(
    q: Queue, key: Any, payload: dict[str, Any], message: str
) -> None:
    @q.job(concurrency=1, concurrency_key=key)
    def sync(account_id: Any = None) -> None: ...

    for enqueue in (lambda: q.enqueue("sync", payload), lambda: sync.enqueue(**payload),
                    lambda: q.enqueue_many([("sync", payload)])):  # fmt: skip
        with pytest.raises(TypeError, match=re.escape(message)):
            enqueue()
    assert stored_keys(q) == {}


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"concurrency_key": "account_id"}, ConfigurationError,
         "concurrency_key='account_id' limits nothing by itself: give concurrency= (how many "
         "of one key run at once) or rate_limit= (how many of one key start per period) too"),
        ({"concurrency": 1, "concurrency_key": 7}, ConfigurationError,
         "concurrency_key must be the name of a payload field (e.g. \"account_id\") or a "
         "function of the payload returning a str, got int: 7"),
        ({"concurrency": 1, "concurrency_key": "not a name"}, ConfigurationError,
         "got str: 'not a name'"),
    ],
)  # fmt: skip
def test_a_bad_concurrency_key_is_refused_where_it_is_declared(
    q: Queue, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=re.escape(message)):
        q.job(**options)
    assert q.job_names() == []


def test_a_field_the_job_does_not_take_is_refused_at_decoration(q: Queue) -> None:
    message = (
        "concurrency_key 'acount_id' of job 'sync' is not one of its parameters (account_id, "
        "full); name a payload field it takes, or pass a function of the payload"
    )
    with pytest.raises(ConfigurationError, match=re.escape(message)):

        @q.job(concurrency=1, concurrency_key="acount_id")
        def sync(ctx: JobContext, account_id: str, full: bool = False) -> None: ...

    with pytest.raises(ConfigurationError, match="'ctx' of job 'own' is not one of its"):

        @q.job(concurrency=1, concurrency_key="ctx")
        def own(ctx: JobContext, **rest: Any) -> None: ...

    @q.job(concurrency=1, concurrency_key="account_id")  # **kwargs may carry it
    def loose(**payload: Any) -> None: ...

    assert q.job_names() == ["loose"]


def test_an_enqueuer_that_does_not_register_a_keyed_type_gives_its_jobs_the_empty_key(
    q: Queue, tmp_path: Path
) -> None:
    @q.job(concurrency=1, concurrency_key="account_id")
    def sync(account_id: str) -> None: ...

    q.process_jobs()  # a claim: the process declares the type's limits
    web = Queue(f"sqlite:///{tmp_path / 'q.db'}", strict=False)
    job_id = web.enqueue("sync", {"account_id": "acme"})
    other = web.enqueue("elsewhere", {})
    assert stored_keys(q) == {job_id: "", other: None}
    web.close()


def test_stats_and_describe_say_per_key(q: Queue) -> None:
    @q.job(concurrency=2, rate_limit="5/m", concurrency_key="account_id")
    def sync(account_id: str) -> None: ...

    q.process_jobs()
    assert q.stats()["limits"] == {"sync": {"concurrency": 2, "rate_limit": "5/m", "per_key": True}}
    assert q._store.limits()["sync"].describe() == "concurrency 2, rate 5/m per key"


def test_a_schedule_of_a_type_keyed_by_a_payload_field_is_refused(q: Queue) -> None:
    @q.job(concurrency=1, concurrency_key="account_id")
    def sync(account_id: str = "all") -> None: ...

    message = (
        "scheduled job 'sync' is limited per key, but a schedule's jobs have an empty payload "
        "(job 'sync' is limited per 'account_id' (its concurrency_key), but the payload has "
        "no 'account_id' (keys: []); pass account_id=...)"
    )
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        q.schedule("0 3 * * *", name="nightly")(sync)

    @q.job(concurrency=1, concurrency_key=lambda payload: payload.get("account_id", "all"))
    def sweep(account_id: str = "all") -> None: ...

    q.schedule("0 3 * * *", name="sweep")(sweep)  # a function with a key for {} is fine


def test_a_typed_field_is_keyed_by_its_json_form(q: Queue) -> None:
    @q.job(concurrency=1, concurrency_key="account")
    def sync(account: uuid.UUID) -> None: ...

    job_id = sync.enqueue(account=uuid.UUID(int=5))
    assert stored_keys(q) == {job_id: "00000000-0000-0000-0000-000000000005"}
