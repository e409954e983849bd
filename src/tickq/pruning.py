"""Internal: the pruning duty workers and ticks share (see ``tickq.retention``).

Once per interval across every process (the ``tickq_retention`` row says when the next
pass is due; one fenced upsert gives it to one process), delete one bounded batch of
finished jobs past their retention (a tick), or batch after batch for a few ms (a worker).
A pass that leaves more is *behind*: due again at once, so the next call goes on.
"""

from __future__ import annotations

from time import monotonic

from .logger import log

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .retention import Retention
    from .runtime import Runtime

HOLD = 60.0
"""Seconds a process holds the pass it claimed: if it dies mid-batch, another takes over."""
TICK_BATCHES = 1
"""A tick deletes one batch per call while behind: a few ms of its budget."""
WORKER_BUDGET = 0.05
"""A worker's step prunes batch after batch for at most this many seconds while behind,
then goes back to its jobs (and comes back at once)."""


def prune_due(runtime: Runtime, tick: bool) -> int:
    """The background duty: when this process's pass is due (first call in a process,
    then once per interval across all processes), prune one batch (a tick) or batches for
    up to ``WORKER_BUDGET`` (a worker). Returns the jobs pruned; never raises (a failed
    pass is logged and retried at the next interval)."""
    retention = runtime.retention
    if retention is None or retention.keeps_everything():
        runtime.prune_not_before = float("inf")  # nothing to prune, ever
        return 0
    if runtime.monotonic() < runtime.prune_not_before:
        return 0
    store = runtime.store
    try:
        claimed = store.claim_retention(runtime.owner, HOLD)
        if claimed is None:  # another process has it, or it is not due
            runtime.prune_not_before = runtime.monotonic() + min(
                HOLD, retention.interval.total_seconds()
            )
            return 0
        return _pass(runtime, retention, claimed, tick)
    except Exception as exc:
        runtime.prune_not_before = runtime.monotonic() + HOLD
        log.warning("tickq could not prune finished jobs (%s); trying again in %.0fs", exc,
                    HOLD, extra={"event": "prune_failed"})  # fmt: skip
        return 0


def _pass(runtime: Runtime, retention: Retention, now: Any, tick: bool) -> int:
    store, pruned, began = runtime.store, 0, monotonic()
    batches, behind = 0, True
    while behind:
        deleted, behind = store.prune_retained(retention, now, retention.batch)
        pruned, batches = pruned + deleted, batches + 1
        if (tick and batches >= TICK_BATCHES) or monotonic() - began >= WORKER_BUDGET:
            break
    store.end_retention_pass(pruned, behind, retention.interval.total_seconds())
    if behind:
        runtime.prune_not_before = 0.0  # the next call takes the next batch
    else:
        runtime.prune_not_before = runtime.monotonic() + retention.interval.total_seconds()
    if pruned:
        log.info("tickq pruned %d finished job(s) past their retention%s", pruned,
                 " (more to go)" if behind else "",
                 extra={"event": "pruned", "pruned": pruned, "behind": behind})  # fmt: skip
    return pruned
