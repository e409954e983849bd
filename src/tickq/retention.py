"""Retention: how long finished jobs stay, and the bounded background duty that prunes them.

Workers and ticks share one duty: once per ``interval`` across every process (the
``tickq_retention`` row says when the next pass is due; one fenced update gives it to one
process), delete one bounded batch of finished jobs past their retention, with their
attempts, and of ended workflow runs with their steps. A pass that finds more than a batch
is *behind*: the row is due again at once, so the next tick (or the same worker, right
away) takes the next batch, until it is caught up.

Never pruned: jobs enqueued with ``keep=True``, and the jobs of a workflow run that has not
ended (its driver and its steps' jobs).
"""

from __future__ import annotations

from datetime import timedelta
from time import monotonic

from .errors import ConfigurationError
from .logger import log

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from .runtime import Runtime

_UNSET: Any = object()
DEFAULT_DONE = timedelta(days=7)
DEFAULT_FAILED = timedelta(days=30)
DEFAULT_INTERVAL = timedelta(minutes=10)
DEFAULT_BATCH = 200
HOLD = 60.0
"""Seconds a process holds the pass it claimed: if it dies mid-batch, another takes over."""
TICK_BATCHES = 1
"""A tick deletes one batch per call while behind: a few ms of its budget."""
WORKER_BUDGET = 0.05
"""A worker's step prunes batch after batch for at most this many seconds while behind,
then goes back to its jobs (and comes back at once)."""


def _check_age(name: str, value: Any) -> timedelta | None:
    if value is None:
        return None
    if not isinstance(value, timedelta):
        raise TypeError(
            f"retention {name} must be a timedelta or None (keep forever), "
            f"got {type(value).__name__}: {value!r}"
        )
    if value <= timedelta(0):
        raise ConfigurationError(f"retention {name} must be positive (or None), got {value}")
    return value


class Retention:
    """How long finished jobs are kept before workers and ticks prune them.

    ``done`` and ``cancelled`` (default 7 days) and ``failed`` (default 30 days): a
    ``timedelta``, or None to keep such jobs forever. ``queues`` overrides them for named
    queues: ``{"audit": Retention(done=None, failed=None)}`` keeps the audit queue's jobs.
    ``interval``: how often a pass runs across all processes; ``batch``: the most jobs one
    batch deletes (one transaction).

    >>> Retention(done=timedelta(days=1)).cancelled
    datetime.timedelta(days=1)
    """

    __slots__ = ("batch", "cancelled", "done", "failed", "interval", "queues")
    if TYPE_CHECKING:
        done: timedelta | None
        failed: timedelta | None
        cancelled: timedelta | None
        interval: timedelta
        batch: int
        queues: dict[str, Retention]

    def __init__(
        self,
        done: timedelta | None = DEFAULT_DONE,
        failed: timedelta | None = DEFAULT_FAILED,
        cancelled: timedelta | None = _UNSET,
        *,
        queues: Mapping[str, Retention] | None = None,
        interval: timedelta = DEFAULT_INTERVAL,
        batch: int = DEFAULT_BATCH,
    ) -> None:
        self.done = _check_age("done", done)
        self.failed = _check_age("failed", failed)
        self.cancelled = self.done if cancelled is _UNSET else _check_age("cancelled", cancelled)
        if not isinstance(interval, timedelta):
            raise TypeError(f"retention interval must be a timedelta, got {interval!r}")
        if interval < timedelta(seconds=1):
            raise ConfigurationError(f"retention interval must be >= 1 second, got {interval}")
        if isinstance(batch, bool) or not isinstance(batch, int):
            raise TypeError(f"retention batch must be an int, got {batch!r}")
        if not 1 <= batch <= 100_000:
            raise ConfigurationError(f"retention batch must be 1..100000, got {batch}")
        self.interval, self.batch = interval, batch
        own: dict[str, Retention] = {}
        for name, rule in (queues or {}).items():
            if not isinstance(name, str) or not name:
                raise ConfigurationError(f"retention queues must be named, got {name!r}")
            if not isinstance(rule, Retention):
                raise TypeError(f"retention for queue {name!r} must be a Retention, got {rule!r}")
            if rule.queues:
                raise ConfigurationError(f"retention for queue {name!r} cannot name queues")
            own[name] = rule
        self.queues = own

    def ages(self) -> dict[str, timedelta | None]:
        """Per finished status, how long a job stays (None: forever)."""
        return {"done": self.done, "failed": self.failed, "cancelled": self.cancelled}

    def keeps_everything(self) -> bool:
        rules = (self, *self.queues.values())
        return all(age is None for rule in rules for age in rule.ages().values())

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: ages in seconds (None: kept forever), per queue the same."""
        seconds = {k: None if v is None else v.total_seconds() for k, v in self.ages().items()}
        return {**seconds, "interval_seconds": self.interval.total_seconds(),
                "batch": self.batch,
                "queues": {name: rule.as_dict() for name, rule in self.queues.items()}}  # fmt: skip

    def __repr__(self) -> str:
        return (f"Retention(done={self.done!r}, failed={self.failed!r}, "
                f"cancelled={self.cancelled!r}, queues={self.queues!r})")  # fmt: skip


DEFAULT_RETENTION = Retention()


def as_retention(value: Any) -> Retention | None:
    """``Queue(retention=)``: a ``Retention``, or None to keep every job forever."""
    if value is None or isinstance(value, Retention):
        return value
    raise TypeError(
        f"retention must be a Retention or None (keep every job), got {type(value).__name__}: "
        f"{value!r}"
    )


def prune_due(runtime: Runtime, tick: bool) -> int:
    """The background duty: when this process's pass is due (first call in a process,
    then once per interval across all processes), prune one batch (a tick) or batches for
    up to ``WORKER_BUDGET`` (a worker). Returns the jobs pruned; never raises (a failed
    pass is logged and retried at the next interval)."""
    retention = runtime.retention
    if retention is None or retention.keeps_everything():
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
