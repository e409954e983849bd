"""Figures: repeated measurements, their median and range, and failed verifications."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any


class Lost(Exception):
    """A run lost or duplicated a job (or otherwise failed): a failure, never a number."""


@dataclass
class Series:
    """The values of one figure over its runs; ``error`` set means the figure failed."""

    values: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.values)

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    def as_json(self) -> dict[str, Any]:
        if not self.ok:
            return {"error": self.error or "no runs", "runs": self.values}
        return {
            "median": self.median,
            "min": min(self.values),
            "max": max(self.values),
            "runs": self.values,
        }


@dataclass
class Figure:
    """One row of the table: tickq beside its floor, same backend, same run."""

    key: str
    title: str
    backend: str
    unit: str
    tickq: Series | None = None
    floor: Series | None = None
    note: str = ""
    unavailable: str | None = None  # why the tickq side could not run in this build

    @property
    def failed(self) -> bool:
        return any(s is not None and s.error is not None for s in (self.tickq, self.floor))

    @property
    def ratio(self) -> float | None:
        if self.tickq and self.floor and self.tickq.ok and self.floor.ok and self.floor.median:
            return self.tickq.median / self.floor.median
        return None

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "figure": self.title,
            "backend": self.backend,
            "unit": self.unit,
            "tickq": self.tickq.as_json() if self.tickq else None,
            "floor": self.floor.as_json() if self.floor else None,
            "ratio": self.ratio,
            "note": self.note,
            "unavailable": self.unavailable,
            "status": "failed" if self.failed else "unavailable" if self.unavailable else "ok",
        }


def repeat(runs: int, *measures: Callable[[], float]) -> list[Series]:
    """Run each measure ``runs`` times, interleaved so drifting machine load hits all alike.

    A measure that raises stops its own series with the error; the others carry on.
    """
    series = [Series() for _ in measures]
    for _ in range(runs):
        for s, measure in zip(series, measures, strict=True):
            if s.error is not None:
                continue
            try:
                s.values.append(measure())
            except Lost as exc:
                s.error = str(exc)
            except Exception as exc:
                s.error = f"{type(exc).__name__}: {exc}"
    return series


def exactly_once(ns: Iterable[int], expected: Iterable[int]) -> None:
    """Raise ``Lost`` unless every expected job ran once and nothing else ran."""
    counts = Counter(ns)
    want = set(expected)
    missing = [n for n in want if n not in counts]
    twice = [n for n, c in counts.items() if c > 1]
    extra = [n for n in counts if n not in want]
    if missing or twice or extra:
        parts = []
        if missing:
            parts.append(f"{len(missing)} job(s) never ran (e.g. n={sorted(missing)[:3]})")
        if twice:
            parts.append(f"{len(twice)} job(s) ran more than once (e.g. n={sorted(twice)[:3]})")
        if extra:
            parts.append(f"{len(extra)} unexpected job(s) ran")
        raise Lost("; ".join(parts))


def check(problem: str | None) -> None:
    if problem:
        raise Lost(problem)


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * p // 100))  # ceil
    return ordered[int(rank) - 1]
