"""Internal: the held-horizon look workers, ticks and ``process_jobs`` share.

A transaction held open on another connection keeps vacuum from removing the dead rows
finished jobs leave, so every claim and empty tick slows while it stays open. A process
that is processing jobs looks for one at most once per ``Runtime.horizon_every`` seconds
(one small query on ``pg_stat_activity``, Postgres only) and logs a WARNING naming its
pid, age and application name, once per transaction. A process that processes nothing
never looks: an idle worker keeps its database asleep.
"""

from __future__ import annotations

from .logger import log

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .runtime import Runtime

RETRY = 60.0
"""After a look that failed (the database away), seconds before the next."""


def look_at_horizon(runtime: Runtime, flowed: bool) -> int:
    """When jobs flowed (``flowed``: this call or step processed some) and this process's
    look is due, list the transactions held open long (a WARNING for each that holds
    vacuum's horizon, once). Returns how many it found; never raises."""
    store = runtime.store
    if not flowed or not store.watches_horizon:
        return 0
    now = runtime.monotonic()
    if now < runtime.horizon_not_before:
        return 0
    runtime.horizon_not_before = now + runtime.horizon_every
    try:
        return sum(1 for t in store.long_transactions() if t["holds_snapshot"])
    except Exception as exc:
        runtime.horizon_not_before = now + max(runtime.horizon_every, RETRY)
        log.debug("tickq could not look for long transactions (%s)", exc)
        return 0
