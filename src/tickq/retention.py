"""Retention: how long finished jobs stay (``Retention``); ``tickq.pruning`` is the bounded
background duty that prunes them.

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

from .errors import ConfigurationError

__all__ = ["Retention"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


_UNSET: Any = object()
DEFAULT_DONE = timedelta(days=7)
DEFAULT_FAILED = timedelta(days=30)
DEFAULT_INTERVAL = timedelta(minutes=10)
DEFAULT_BATCH = 200


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
