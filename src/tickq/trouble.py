"""Internal: how a driver waits while something it needs (the database) keeps failing."""

from __future__ import annotations

from time import monotonic

from .errors import DatabaseUnavailable, SchemaMissing, TickqError
from .logger import INFO, WARNING, log


class Trouble:
    """Capped, jittered exponential backoff while something keeps failing.

    The cap is short on purpose: a try against a database that is down costs a refused
    connection, while every second of the cap can be a second of lag after it is back
    (a 30 s cap left a worker idle ~9 s after a 20 s outage). Logs one WARNING line per
    episode (a run of failures), then a reminder every ``REMIND`` seconds while it lasts,
    and an INFO line when it ends: an outage is one story, not a line per try.
    ``quiet_first``: the first failure is INFO (a connection cut and restored at once,
    as a LISTEN connection is by every restart); a second one in a row is the WARNING.
    """

    FIRST, CAP = 0.25, 1.5
    REMIND = 60.0

    def __init__(self, what: str, quiet_first: bool = False) -> None:
        self.what = what
        self.quiet_first = quiet_first
        self.failures = 0
        self.since = 0.0
        self._warned = False
        self._told = 0.0  # monotonic: when a line was last logged for this episode

    def happened(self, exc: Exception) -> float:
        """Log ``exc`` (once per episode, see above); return how long to wait."""
        import random  # only in trouble: a waking host's tick never pays for it

        now = monotonic()
        if not self.failures:
            self.since, self._warned = now, False
        self.failures += 1
        delay = min(self.CAP, self.FIRST * 2.0 ** (self.failures - 1))
        delay *= random.uniform(0.8, 1.2)  # workers that lost the database together spread out
        if self._warned and now - self._told < self.REMIND:
            return delay
        quiet = self.quiet_first and self.failures == 1
        self._told, self._warned = now, not quiet
        extra = {"event": f"{self.what.split()[0].lower()}_unavailable", "failures": self.failures}
        still = f" (still, after {now - self.since:.0f}s)" if self.failures > 2 else ""
        if isinstance(exc, (DatabaseUnavailable, SchemaMissing)) or quiet or self.failures > 2:
            log.log(INFO if quiet else WARNING, "tickq %s trouble%s (try %d): %s; retrying in "
                    "%.1fs", self.what, still, self.failures, _reason(exc), delay,
                    extra=extra)  # fmt: skip
        else:  # the first time an unexpected error is seen: its traceback, once
            log.exception("tickq %s trouble (try %d): unexpected %s; retrying in %.1fs",
                          self.what, self.failures, type(exc).__name__, delay,
                          extra=extra)  # fmt: skip
        return delay

    def over(self) -> bool:
        """Note success; True (and a log line) when it ends a run of failures."""
        if not self.failures:
            return False
        log.info("tickq %s reachable again after %d failed tries over %.1fs", self.what,
                 self.failures, monotonic() - self.since,
                 extra={"event": f"{self.what.split()[0].lower()}_recovered"})  # fmt: skip
        self.failures = 0
        return True


def worth_retrying(exc: Exception) -> bool:
    """The database's trouble (down, read-only, full, or a raw driver error), not a
    refusal of tickq's own: trying again later may go through."""
    return isinstance(exc, DatabaseUnavailable) or not isinstance(exc, TickqError)


def _reason(exc: Exception) -> str:
    if isinstance(exc, (DatabaseUnavailable, SchemaMissing)):
        return str(exc)
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
