"""What a tick reads and writes: its start, the backlog, and schedule cursors moved
together with the slot jobs they enqueue."""

from __future__ import annotations

from .plumbing import Plumbing
from .records import TickState

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime
    from typing import Any

    from .plumbing import Rows, Statement
    from .records import ScheduleMove


DUE_COUNT_CAP = 1000
"""A tick counts due jobs up to this many (the SQL fragment ``due_count``): a count of
this much means "this many or more", so no tick walks a large backlog to count it."""


class TickQueries(Plumbing):
    """The tick's reads and the schedule cursors' one write."""

    def start_tick(self) -> TickState:
        """Record that a tick began and read what it needs, in one round trip."""
        params = {"now": self._now()}
        return self._tick_state(self._query_many(self._start_tick_statements(params))[-1])

    def _start_tick_statements(self, params: dict[str, Any]) -> list[Statement]:
        return [("record_tick", params), ("tick_state", params)]

    def tick_state(self) -> TickState:
        """The time, the backlog and every schedule's cursor, without recording a tick."""
        return self._tick_state(self._query("tick_state", now=self._now()))

    def _tick_state(self, rows: Rows) -> TickState:
        now, due, earliest, cursors = None, 0, None, {}
        for kind, name, at, count in rows:
            if kind == "now":
                now = self._decode_ts(at)
            elif kind == "backlog":
                due, earliest = int(count or 0), self._decode_ts(at)
            else:
                cursors[name] = self._decode_ts(at)
        return TickState(now, due, earliest, cursors)  # type: ignore[arg-type]

    def tick_backlog(self) -> tuple[int, datetime | None, datetime]:
        """(pending jobs due now, counted up to ``DUE_COUNT_CAP``; when the next job comes
        due (``earliest_pending``); now)."""
        due, earliest, now = self._query("tick_backlog", now=self._now())[0]
        return int(due), self._decode_ts(earliest), self._decode_ts(now)  # type: ignore[return-value]

    def enqueue_schedules(self, moves: Sequence[ScheduleMove]) -> list[dict[str, int] | None]:
        """Apply each move whose cursor is still where it was read, in one transaction.

        Per move: ``{unique_key: job id}`` of the jobs inserted, or None when another tick
        moved the cursor first (and so enqueued those slots itself).
        """
        if not moves:
            return []
        statements = [("enqueue_schedule", self._move_params(m)) for m in moves]
        results = self._query_many(statements)
        return [{key: int(id_) for id_, key in rows if id_} if rows else None for rows in results]

    def _move_params(self, move: ScheduleMove) -> dict[str, Any]:
        return {
            "name": move.name, "expected": self._ts(move.expected),
            "handled_until": self._ts(move.handled_until),
            "last_slot": self._ts(move.last_slot), "now": self._now(),
        }  # fmt: skip

    def schedule_states(self) -> list[dict[str, Any]]:
        """Each stored schedule cursor: name, handled_until, last_slot, updated_at."""
        return [
            {"name": name, "handled_until": self._decode_ts(until),
             "last_slot": self._decode_ts(last), "updated_at": self._decode_ts(updated)}
            for name, until, last, updated in self._query("schedule_states")
        ]  # fmt: skip

    def last_tick(self) -> tuple[datetime | None, int, datetime]:
        """(when the last tick began or None, how many ticks so far, now)."""
        at, ticks, now = self._query("last_tick", now=self._now())[0]
        return self._decode_ts(at), int(ticks or 0), self._decode_ts(now)  # type: ignore[return-value]
