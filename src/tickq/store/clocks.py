"""SQLite's answer to clocks it cannot trust: leases on the host's monotonic clock, and
schedule slots due only once most live processes' wall clocks say so.

On Postgres the database's clock decides both. On SQLite every process brings its own
wall clock, and a step (NTP, a VM resumed) or a process whose clock runs ahead would
rescue live jobs and fire schedule slots early. Every process on a host shares one
``CLOCK_MONOTONIC`` (``clock.monotonic_domain_of``), which no wall-clock step moves: a
lease records its deadline on it, and each process records there how far its wall clock
stands from it, so a tick can tell when its own runs ahead of the others'.
"""

from __future__ import annotations

import os
import threading
from datetime import timedelta

from ..clock import monotonic_domain_of, monotonic_of
from .ticks import TickQueries

_NAMING = threading.Lock()

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .plumbing import Statement
    from .records import TickState

CLOCK_EVERY = 5.0
"""Seconds (monotonic) between a process's notes of its wall clock, taken with a rescue."""
CLOCK_WINDOW = 60.0
"""A process not heard from for this long no longer counts among the live clocks."""
CLOCK_TOLERANCE = 1.0
"""Seconds a clock may run ahead of the others before its schedules wait for them."""
FORGET_OTHER_DOMAINS = timedelta(days=1)
"""Notes from another boot (or a test's clock) are dropped once this old by the wall clock."""


class SQLiteClocks(TickQueries):
    """Leases measured on the shared monotonic clock; ticks that wait for the majority."""

    _noted = -CLOCK_EVERY
    _majority: tuple[float, float, float] = (-CLOCK_EVERY, 0.0, 0.0)
    """(monotonic reading, the live clocks' majority offset, this clock's offset) when the
    live clocks were last read: a step of this clock since reads them again."""
    _noted_as: tuple[int, str] | None = None

    def _reading(self) -> tuple[str | None, float]:
        """(the clock's monotonic domain, its monotonic reading now)."""
        return monotonic_domain_of(self.clock), monotonic_of(self.clock)()

    def _lease_params(self, lease_seconds: float) -> dict[str, Any]:
        domain, mono = self._reading()
        until = self._in(lease_seconds)
        return {
            "lease_until": until, "lease_mono": mono + lease_seconds,
            "lease_clock": None if domain is None else f"{domain} {until}",
        }  # fmt: skip

    def _expiry_params(self) -> dict[str, Any]:
        """What ``lease_ran_out`` compares leases with: the wall clock and the monotonic one."""
        domain, mono = self._reading()
        return {"now": self._now(), "clock": domain, "mono": mono}

    # -- the clocks of live processes -----------------------------------------------------
    def _clock_owner(self) -> str:
        """This store's name among the clocks (a process's stores each keep a note)."""
        pid, noted = os.getpid(), self._noted_as
        if noted is not None and noted[0] == pid:
            return noted[1]
        with _NAMING:  # threads asking at once get one name (see Runtime.owner)
            if self._noted_as is None or self._noted_as[0] != pid:
                self._noted_as = (pid, f"{pid}:{os.urandom(4).hex()}")
            return self._noted_as[1]

    def _clock_params(self) -> dict[str, Any] | None:
        domain, mono = self._reading()
        if domain is None:
            return None
        now = self.clock.now()
        return {
            "owner": self._clock_owner(), "clock": domain, "mono": mono,
            "offset": now.timestamp() - mono, "now": self._ts(now), "window": CLOCK_WINDOW,
            "forget_before": self._ts(now - FORGET_OTHER_DOMAINS),
        }  # fmt: skip

    def _clock_statements(self, params: dict[str, Any]) -> list[Statement]:
        self._noted = params["mono"]
        return [("note_clock", params), ("forget_clocks", params)]

    def note_clock(self) -> None:
        """Note this process's wall clock among the live ones, at most every
        ``CLOCK_EVERY`` seconds (a worker does it with its rescues)."""
        params = self._clock_params()
        if params is not None and params["mono"] - self._noted >= CLOCK_EVERY:
            self._query_many(self._clock_statements(params))

    def start_tick(self) -> TickState:
        return self._agreed(self._start_tick_statements({"now": self._now()}))

    def tick_state(self) -> TickState:
        return self._agreed([("tick_state", {"now": self._now()})])

    def _agreed(self, statements: list[Statement]) -> TickState:
        """The tick's state with ``now`` as most live clocks have it, when this process's
        clock runs ahead of them: schedule slots then come due no earlier than that."""
        params = self._clock_params()
        if params is None:
            return self._tick_state(self._query_many(statements)[-1])
        read_at, agreed, mine = self._majority
        fresh = params["mono"] - read_at < CLOCK_EVERY
        if fresh and abs(params["offset"] - mine) <= CLOCK_TOLERANCE:
            # Noted and read less than CLOCK_EVERY ago, and this clock has not stepped since:
            # the tick's own statements alone (an empty tick stays a read, no write lock).
            state = self._tick_state(self._query_many(statements)[-1])
        else:
            noted = self._clock_statements(params)
            results = self._query_many([*noted, *statements, ("live_clocks", params)])
            state = self._tick_state(results[-2])
            agreed = majority([float(r[0]) for r in results[-1]])
            self._majority = (params["mono"], agreed, params["offset"])
        ahead = params["offset"] - agreed
        if ahead <= CLOCK_TOLERANCE:
            return state
        from .records import TickState

        now = state.now - timedelta(seconds=ahead)
        return TickState(now, state.due, state.earliest_pending, state.cursors)


def majority(offsets: list[float]) -> float:
    """The latest time most clocks have reached, as an offset: a moment is due by more
    than half of ``offsets`` once it is due by this one (of two clocks, the slower)."""
    ordered = sorted(offsets)
    return ordered[(len(ordered) + 1) // 2 - 1]
