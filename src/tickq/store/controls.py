"""Queue controls in the database: paused queues and the limits of job types.

Every claim reads them (``tickq_due`` on Postgres, the claim statements on SQLite), so a
pause or a limit holds for every worker and tick on every machine, with nothing kept in
memory that another process would not see.
"""

from __future__ import annotations

from ..controls import Limit
from .plumbing import Plumbing

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from .plumbing import Statement


class ControlQueries(Plumbing):
    """Pause and resume queues; declare and read the limits of job types."""

    _undeclared: list[Statement] = []
    """Statements declaring limits, written with the next claim (a class-level empty list
    until ``declare_limits`` gives the store its own)."""

    def pause(self, queue: str) -> bool:
        """Claim no more jobs of ``queue`` (running ones finish); False if already paused."""
        return bool(self._query_many([("pause", {"queue": queue, "now": self._now()})])[0])

    def resume(self, queue: str) -> bool:
        """Claim ``queue``'s jobs again (wakes listening workers); False if not paused."""
        return bool(self._query_many([("resume", {"queue": queue})])[0])

    def paused(self) -> set[str]:
        """The names of the paused queues."""
        return {r[0] for r in self._query("paused")}

    def limits(self) -> dict[str, Limit]:
        """The limits every claim obeys, by job type (as the processes declared them)."""
        return {
            type_: Limit(concurrency, rate, float(per) if per is not None else None, bool(keyed))
            for type_, concurrency, rate, per, keyed in self._query("limits")
        }

    def declare_limits(self, limits: Mapping[str, Limit | None]) -> None:
        """Make these the limits of these job types (None: the type has none), written in
        the transaction of the next claim; types not named keep theirs."""
        unlimited = [t for t, limit in limits.items() if limit is None]
        declared: list[Statement] = [
            ("declare_limit", self._limit_params(t, limit))
            for t, limit in limits.items()
            if limit is not None
        ]
        forget = [("forget_limits", {"types": self._texts_param(unlimited)})] if unlimited else []
        self._undeclared = declared + forget
        if declared:
            self._limits_declared()

    def _limit_params(self, job_type: str, limit: Limit) -> dict[str, object]:
        return {"type": job_type, "concurrency": limit.concurrency, "rate": limit.rate,
                "per": limit.per, "keyed": limit.keyed, "now": self._now()}  # fmt: skip

    def _texts_param(self, texts: list[str]) -> object:
        return self._queues_param(texts)

    def _limits_declared(self) -> None:
        """This process declared limits: its claims look for limited jobs from now on."""

    def _declared(self) -> None:
        """The declarations went in with a claim that committed."""
        self._undeclared = []
