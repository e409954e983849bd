"""Helpers for your own tests: clocks you control, and running due jobs inline.

>>> from tickq.testing import FrozenClock, drain
>>> q.clock = FrozenClock()          # time moves only when you say so
>>> q.clock.advance(minutes=5)
>>> drain(q)                          # run everything due now, retries included
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from .clock import FrozenClock

if TYPE_CHECKING:
    from .queue import Queue

__all__ = ["FrozenClock", "SharedClock", "drain"]


class SharedClock:
    """A clock several processes share through a file: real time plus an offset.

    End-to-end tests start the app's processes with the same file and fast-forward all of
    them at once with ``clock.advance(minutes=30)`` instead of sleeping. On SQLite give it
    to every process that ticks or runs jobs: a schedule slot comes due once most live
    processes' clocks say so, so one on the real clock holds the others back.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        if not os.path.exists(self.path):
            self._write(0.0)

    def offset(self) -> timedelta:
        with open(self.path, encoding="utf-8") as f:
            return timedelta(seconds=float(f.read().strip() or 0))

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset()

    def advance(self, delta: timedelta | None = None, **kwargs: float) -> datetime:
        step = delta if delta is not None else timedelta(**kwargs)
        self._write((self.offset() + step).total_seconds())
        return self.now()

    def _write(self, seconds: float) -> None:
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(repr(seconds))
        os.replace(tmp, self.path)  # readers never see a half-written file


def drain(queue: Queue, max_rounds: int = 100, **options: Any) -> dict[str, int]:
    """Run ``process_jobs`` until nothing is due now; returns the summed report."""
    total: dict[str, int] = {}
    for _ in range(max_rounds):
        report = queue.process_jobs(**options)
        for key, value in report.items():
            if isinstance(value, int):
                total[key] = total.get(key, 0) + value
        if not report["claimed"]:
            return total
    raise RuntimeError(f"jobs were still due after {max_rounds} rounds of process_jobs")
