"""Property tests: SQLite and Postgres make the same decision about every payload and option
(refused with the same message, or stored and delivered exactly as given), and the decision
is the documented one.

Examples per test: ``TICKQ_HYPOTHESIS_EXAMPLES`` (default 100); under ``CI=true`` the
examples are derandomised, so CI runs the same ones every time.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tickq import JobContext, Queue
from tickq.job_options import INT_MAX, INT_MIN
from tickq.payload import MAX_DEPTH, dump_payload

PROPERTY = settings(
    max_examples=int(os.environ.get("TICKQ_HYPOTHESIS_EXAMPLES", "100")),
    derandomize=os.environ.get("CI") == "true",
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class Pair:
    """The same jobs on a SQLite and a Postgres queue."""

    def __init__(self, sqlite_url: str, postgres_url: str) -> None:
        self.queues = [Queue(sqlite_url), Queue(postgres_url)]
        self.received: list[list[dict[str, Any]]] = [[], []]
        for q, got in zip(self.queues, self.received, strict=True):
            q.migrate()
            q.job(name="echo")(_echo_into(got))

    def enqueue(self, payload: Any = None, **options: Any) -> list[tuple[str, Any]]:
        """Each backend's decision: ("refused", message) or ("stored", job)."""
        decisions = []
        for q in self.queues:
            try:
                job_id = q.enqueue("echo", payload, **options)
            except (TypeError, ValueError) as exc:
                decisions.append(("refused", f"{type(exc).__name__}: {exc}"))
            else:
                decisions.append(("stored", q.get_job(job_id)))
        return decisions

    def run(self) -> list[list[dict[str, Any]]]:
        for q, got in zip(self.queues, self.received, strict=True):
            got.clear()
            q.process_jobs(limit=1000)
        return self.received

    def close(self) -> None:
        for q in self.queues:
            q.close()


def _echo_into(got: list[dict[str, Any]]) -> Any:
    def echo(**kwargs: Any) -> None:
        got.append(kwargs)

    return echo


@pytest.fixture
def pair(tmp_path: Path, pg_schema_url: str) -> Iterator[Pair]:
    both = Pair(f"sqlite:///{tmp_path / 'tickq.db'}", pg_schema_url)
    yield both
    both.close()


# -- payloads -------------------------------------------------------------------------------
SCALARS = (
    st.none() | st.booleans()
    | st.integers() | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([-0.0, 1e16, 5e-324])
    | st.text() | st.text(st.characters(categories=["Cs", "Cc", "Co"]), max_size=3)
    | st.sampled_from(["\x00", "a\x00b", "\U0001f600", '"\\', "ctx", "conn"])
)  # fmt: skip
"""JSON's values, with the edges that jsonb or a driver used to change: NUL and other
control characters, lone surrogates, -0.0, 1e16, big ints."""
NOT_JSON = st.sampled_from(
    [float("nan"), float("inf"), -float("inf"), (1, 2), {1, 2}, b"x", object(),
     datetime(2030, 1, 1, tzinfo=UTC)]
)  # fmt: skip
"""NaN, infinities and what JSON can't carry as is: all refused."""
KEYS = st.text(max_size=8) | st.sampled_from(["", "ctx", "a.b", "[0]", "\x00"])


def values(hostile: bool) -> st.SearchStrategy[Any]:
    leaves = SCALARS | NOT_JSON if hostile else SCALARS
    keys = KEYS | st.integers(-2, 2) | st.none() if hostile else KEYS
    return st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
        max_leaves=12,
    )


def plain(value: Any, depth: int = 1) -> bool:
    """What tickq promises to carry exactly: written independently of tickq.payload."""
    if type(value) is str:  # no high surrogate before a low one: JSON would join them
        return not any(
            "\ud800" <= a <= "\udbff" and "\udc00" <= b <= "\udfff"
            for a, b in itertools.pairwise(value)
        )
    if value is None or type(value) is bool:
        return True
    if type(value) is int:
        return len(str(abs(value))) <= 4300
    if type(value) is float:
        return value == value and value not in (float("inf"), float("-inf"))
    if type(value) is list:
        return depth < MAX_DEPTH and all(plain(v, depth + 1) for v in value)
    if type(value) is dict:
        return depth < MAX_DEPTH and all(
            type(k) is str and plain(k) and plain(v, depth + 1) for k, v in value.items()
        )
    return False


@PROPERTY
@given(payload=st.dictionaries(KEYS | st.integers(0, 2), values(hostile=True), max_size=5))
def test_both_backends_decide_the_same_and_deliver_exactly(
    pair: Pair, payload: dict[Any, Any]
) -> None:
    sqlite, postgres = pair.enqueue(payload)
    if not plain(payload):
        assert sqlite == postgres, "the same refusal, word for word"
        assert sqlite[0] == "refused" and sqlite[1].startswith("TypeError: payload")
        return
    assert sqlite[0] == postgres[0] == "stored", (sqlite, postgres)
    got_sqlite, got_postgres = pair.run()
    for got in (got_sqlite, got_postgres):
        assert len(got) == 1
        assert repr(got[0]) == repr(payload), "same types and values (-0.0 stays -0.0)"
        assert json.dumps(got[0]) == json.dumps(payload), "same keys in the same order"


@PROPERTY
@given(payload=st.dictionaries(KEYS, values(hostile=False), max_size=6))
def test_every_plain_payload_arrives_exactly_on_both_backends(
    pair: Pair, payload: dict[str, Any]
) -> None:
    decisions = pair.enqueue(payload)
    assert [d[0] for d in decisions] == ["stored", "stored"]
    for got in pair.run():
        assert [repr(g) for g in got] == [repr(payload)]
        assert [list(g) for g in got] == [list(payload)]


def _full_checks(q: Queue, job_type: str, payload: Any) -> tuple[str, str]:
    """What the full checks decide, written out: ``dump_payload``, then the fit."""
    definition = q._definition(job_type)
    try:
        text = dump_payload(payload, job_type)
        definition.check_payload(payload or {})
    except (TypeError, ValueError) as exc:
        return "refused", f"{type(exc).__name__}: {exc}"
    return "stored", text


def _enqueue_path(q: Queue, job_type: str, payload: Any) -> tuple[str, str]:
    kind = q._runtime.job_kind(job_type)
    try:
        return "stored", kind.new_job(q._runtime.clock, payload).payload_json
    except (TypeError, ValueError) as exc:
        return "refused", f"{type(exc).__name__}: {exc}"


FIT_KEYS = st.sampled_from(["n", "name", "tags", "ratio", "ctx", "extra"]) | KEYS


@PROPERTY
@given(
    job_type=st.sampled_from(["typed", "loose", "bare"]),
    payload=st.none()
    | st.dictionaries(FIT_KEYS | st.integers(0, 2), values(hostile=True), max_size=5)
    | st.dictionaries(FIT_KEYS, SCALARS | NOT_JSON | st.lists(SCALARS, max_size=3), max_size=5),
)
def test_the_quick_path_for_plain_payloads_decides_as_the_full_checks(
    tmp_path: Path, job_type: str, payload: Any
) -> None:
    q = Queue(f"sqlite:///{tmp_path / 'unused.db'}")  # no I/O: new_job only

    @q.job(name="typed")
    def typed(
        ctx: JobContext,
        n: int,
        name: str | None = None,
        tags: list[str] | None = None,
        ratio: float = 0.0,
    ) -> None: ...

    @q.job(name="loose")
    def loose(ctx: JobContext, n: int, **rest: Any) -> None: ...

    @q.job(name="bare")
    def bare() -> None: ...

    assert _enqueue_path(q, job_type, payload) == _full_checks(q, job_type, payload)


# -- options --------------------------------------------------------------------------------
ANY_OPTION = (
    st.none() | st.booleans() | st.integers() | st.integers(INT_MIN - 2, INT_MIN + 2)
    | st.integers(INT_MAX - 2, INT_MAX + 2) | st.floats() | st.text(max_size=4)
    | st.sampled_from(["", "\x00", "\ud800", "default", "active", "all"])
)  # fmt: skip


def option_ok(name: str, value: Any) -> bool:
    """Which option values tickq documents as valid (None: the default)."""
    if value is None:
        return name != "unique_scope"
    if name in ("priority", "max_attempts"):
        low = INT_MIN if name == "priority" else 1
        return type(value) is int and low <= value <= INT_MAX
    if name == "unique_scope":
        return value in ("active", "all") and type(value) is str
    ok_text = type(value) is str and "\x00" not in value and "\ud800" not in value
    return ok_text and (name != "queue" or value != "")


@PROPERTY
@given(
    name=st.sampled_from(["priority", "max_attempts", "queue", "unique_key", "unique_scope"]),
    value=ANY_OPTION,
)
def test_both_backends_take_or_refuse_each_option_the_same(
    pair: Pair, name: str, value: Any
) -> None:
    sqlite, postgres = pair.enqueue({}, **{name: value})
    if not option_ok(name, value):
        assert sqlite == postgres
        assert sqlite[0] == "refused" and name in sqlite[1], sqlite
        return
    assert sqlite[0] == postgres[0] == "stored", (sqlite, postgres)
    if name in ("priority", "max_attempts", "queue", "unique_key") and value is not None:
        assert getattr(sqlite[1], name) == getattr(postgres[1], name) == value
        assert type(getattr(sqlite[1], name)) is type(getattr(postgres[1], name)) is type(value)
    ran = pair.run()
    if name != "unique_key":  # a second example's unique_key may already exist
        assert len(ran[0]) == len(ran[1])
