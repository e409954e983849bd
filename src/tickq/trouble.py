"""Internal: how a driver waits while something it needs (the database) keeps failing."""

from __future__ import annotations

import random
from time import monotonic

from .errors import DatabaseUnavailable, SchemaMissing
from .logger import log


class Trouble:
    """Capped, jittered exponential backoff while something keeps failing.

    The cap is short on purpose: a try against a database that is down costs a refused
    connection, while every second of the cap can be a second of lag after it is back
    (a 30 s cap left a worker idle ~9 s after a 20 s outage). Logs the first tries, then
    every ``LOG_EVERY``-th, so a long outage doesn't flood the log.
    """

    FIRST, CAP = 0.25, 1.5
    LOG_EVERY = 20

    def __init__(self, what: str) -> None:
        self.what = what
        self.failures = 0
        self.since = 0.0

    def happened(self, exc: Exception) -> float:
        """Log ``exc``; return how long to wait before trying again."""
        if not self.failures:
            self.since = monotonic()
        self.failures += 1
        delay = min(self.CAP, self.FIRST * 2.0 ** (self.failures - 1))
        delay *= random.uniform(0.8, 1.2)  # workers that lost the database together spread out
        extra = {"event": f"{self.what.split()[0].lower()}_unavailable", "failures": self.failures}
        if self.failures > 3 and self.failures % self.LOG_EVERY:
            return delay
        if isinstance(exc, (DatabaseUnavailable, SchemaMissing)):
            log.warning("tickq %s trouble (try %d): %s; retrying in %.1fs", self.what,
                        self.failures, exc, delay, extra=extra)  # fmt: skip
        else:
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
