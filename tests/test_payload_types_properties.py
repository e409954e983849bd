"""Property test: every supported payload type round-trips through SQLite and Postgres: the
job function receives a value equal to the one enqueued, of the same type, with the same
digits (Decimal), offset, zone and fold (datetime), member (Enum) and fields (dataclass,
TypedDict, Pydantic model).

Examples: ``TICKQ_HYPOTHESIS_EXAMPLES`` (default 30: each example is one job per backend);
derandomised under ``CI=true``.
"""

from __future__ import annotations

import dataclasses
import enum
import os
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any, TypedDict
from uuid import UUID
from zoneinfo import ZoneInfo

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tickq import Queue

PROPERTY = settings(
    max_examples=int(os.environ.get("TICKQ_HYPOTHESIS_EXAMPLES", "30")),
    derandomize=os.environ.get("CI") == "true",
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Mixed(enum.Enum):
    A = "a"
    B = 2
    C = 2.5
    D = None


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    label: str | None = None


@dataclasses.dataclass(frozen=True)
class Shape:
    points: list[Point]
    level: Level


class Totals(TypedDict):
    amount: Decimal
    on: date


class Receipt(pydantic.BaseModel):
    id: UUID
    total: Decimal
    issued: datetime


TEXT = st.text(max_size=8)
ZONES = st.sampled_from([UTC, ZoneInfo("Europe/Berlin"), ZoneInfo("America/St_Johns"),
                         ZoneInfo("Australia/Lord_Howe")])  # fmt: skip
OFFSETS = st.builds(lambda m: timezone(timedelta(minutes=m)), st.integers(-23 * 60, 23 * 60))
AWARE = st.datetimes(timezones=st.one_of(ZONES, OFFSETS))
DECIMALS = st.decimals(allow_nan=False, allow_infinity=False, places=None)
POINTS = st.builds(Point, st.integers(-(2**53), 2**53), st.none() | TEXT)
VALUES = {
    "when": AWARE,
    "day": st.dates(),
    "amount": DECIMALS,
    "id": st.uuids(),
    "level": st.sampled_from(Level),
    "mixed": st.sampled_from(Mixed),
    "shape": st.builds(Shape, st.lists(POINTS, max_size=3), st.sampled_from(Level)),
    "totals": st.builds(lambda a, d: Totals(amount=a, on=d), DECIMALS, st.dates()),
    "receipt": st.builds(
        Receipt, id=st.uuids(), total=DECIMALS, issued=st.datetimes(timezones=st.just(UTC))
    ),
    "many": st.dictionaries(TEXT, st.none() | st.uuids(), max_size=3),
    "days": st.lists(st.dates(), max_size=3),
}


def record(got: list[dict[str, Any]]) -> Any:
    def everything(when: datetime, day: date, amount: Decimal, id: UUID, level: Level,
                   mixed: Mixed, shape: Shape, totals: Totals, receipt: Receipt,
                   many: dict[str, UUID | None], days: list[date]) -> None:  # fmt: skip
        got.append(dict(locals()))

    return everything


@pytest.fixture
def queues(tmp_path: Path, pg_schema_url: str) -> Iterator[list[tuple[Queue, list[Any]]]]:
    pairs = []
    for url in (f"sqlite:///{tmp_path / 'tickq.db'}", pg_schema_url):
        q, got = Queue(url), []  # type: list[Any]
        q.migrate()
        q.job()(record(got))
        pairs.append((q, got))
    yield pairs
    for q, _ in pairs:
        q.close()


def same(a: Any, b: Any) -> bool:
    """Equal, of the same type, and alike in what ``==`` overlooks."""
    if type(a) is not type(b):
        return False
    if isinstance(a, datetime):  # a fold matters only where it changes the offset
        ambiguous = a.replace(fold=1 - a.fold).utcoffset() != a.utcoffset()
        return (a == b and a.replace(tzinfo=None) == b.replace(tzinfo=None)
                and a.utcoffset() == b.utcoffset() and (not ambiguous or a.fold == b.fold)
                and getattr(a.tzinfo, "key", None) == getattr(b.tzinfo, "key", None))  # fmt: skip
    if isinstance(a, Decimal):
        return a.as_tuple() == b.as_tuple()  # 1.10 stays 1.10, -0 stays -0
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, pydantic.BaseModel):  # Pydantic's own rules rebuild it (its UTC type)
        return a == b and a.model_dump(mode="json") == b.model_dump(mode="json")
    if dataclasses.is_dataclass(a):
        return same(vars(a), vars(b))
    return a == b and repr(a) == repr(b)


@PROPERTY
@given(st.fixed_dictionaries(VALUES))
def test_every_supported_type_round_trips_on_both_backends(
    queues: list[tuple[Queue, list[Any]]], payload: dict[str, Any]
) -> None:
    for q, got in queues:
        got.clear()
        q.enqueue("everything", payload)
        assert q.process_jobs()["succeeded"] == 1
        wrong = [k for k in payload if not same(got[0][k], payload[k])]
        assert not wrong, (q._store.dialect, {k: (got[0][k], payload[k]) for k in wrong})
