"""Postgres: say when a transaction held open elsewhere slows every tick.

A transaction left open (a session idle in transaction, a forgotten ``BEGIN`` in a
console, a long report) keeps every row version newer than its snapshot: vacuum can't
remove the dead rows finished jobs leave, and each claim and empty tick walks over more of
them. tickq can't end it, but its health report and ``stats()`` name it, workers and ticks
look for it while jobs flow (``tickq.horizon``), and a WARNING line says so once per
transaction.
"""

from __future__ import annotations

from .plumbing import Plumbing

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

LONG_TRANSACTION = 60.0
"""Seconds a transaction may stay open before the health report names it."""
SHOWN = 10
"""At most this many are listed, the oldest first."""


class PostgresHorizon(Plumbing):
    """``database_health``: the transactions open longer than ``long_transaction_seconds``."""

    long_transaction_seconds = LONG_TRANSACTION
    watches_horizon = True
    _warned: frozenset[tuple[int, str]] = frozenset()

    def database_health(self) -> dict[str, Any]:
        """``long_transactions``: pid, age_seconds, application_name, state and whether it
        holds back vacuum (``holds_snapshot``), of each session in this database whose
        transaction has been open longer than ``long_transaction_seconds`` (other users'
        sessions show only with the ``pg_read_all_stats`` role)."""
        return {"long_transactions": self.long_transactions()}

    def long_transactions(self) -> list[dict[str, Any]]:
        """The transactions open longer than ``long_transaction_seconds``, oldest first
        (one small query on ``pg_stat_activity``); a WARNING line for each one that holds
        back vacuum, once per transaction."""
        rows = self._query("long_transactions", threshold=self.long_transaction_seconds,
                           shown=SHOWN)  # fmt: skip
        found = [
            {"pid": pid, "age_seconds": round(float(age), 3), "application_name": app,
             "state": state, "holds_snapshot": bool(holds), "started_at": started}
            for pid, age, app, state, holds, started in rows
        ]  # fmt: skip
        self._warn(found)
        for t in found:
            t.pop("started_at")
        return found

    def _warn(self, found: list[dict[str, Any]]) -> None:
        from ..logger import log

        keys = [((t["pid"], str(t["started_at"])), t) for t in found]
        for key, t in keys:
            if not t["holds_snapshot"] or key in self._warned:
                continue  # no snapshot and no xid: it holds nothing back (yet)
            log.warning("tickq: a PostgreSQL transaction has been open %.0fs (pid %s, "
                        "application_name %r, %s): it keeps vacuum from removing dead rows, "
                        "so every tick slows; end it (commit, or pg_terminate_backend(%s)) "
                        "and find what leaves it open", t["age_seconds"], t["pid"],
                        t["application_name"], t["state"], t["pid"],
                        extra={"event": "long_transaction", "pid": t["pid"],
                               "age_seconds": t["age_seconds"],
                               "application_name": t["application_name"]})  # fmt: skip
        # Those still open that were warned of stay remembered (and only those).
        self._warned = frozenset(
            key for key, t in keys if t["holds_snapshot"] or key in self._warned
        )
