"""Internal: checking the worker's options, and how it names things in its log lines."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError
from .logger import log

if TYPE_CHECKING:
    from .runtime import Runtime


def parse_queues(queues: Sequence[str] | str | None) -> tuple[str, ...] | None:
    """``"a,b"`` or ``["a", "b"]`` -> ``("a", "b")``; None or empty -> every queue."""
    if queues is None:
        return None
    names: Iterable[str] = queues.split(",") if isinstance(queues, str) else queues
    parsed = tuple(n.strip() for n in names)
    if not parsed or any(not n for n in parsed):
        raise ConfigurationError(
            f"queues must be non-empty names separated by commas, e.g. 'default,emails'; "
            f"got {queues!r}"
        )
    return parsed


def where(url: str) -> str:
    """The database's location without credentials or options."""
    return url.split("@")[-1].split("?")[0].split("://")[-1]


def summary(report: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in report.items())


def check_concurrency(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"concurrency must be a whole number >= 1, got {value!r}")
    return value


def check_seconds(name: str, value: float, zero_ok: bool) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or value < 0
        or (value == 0 and not zero_ok)
    ):
        limit = ">= 0" if zero_ok else "> 0"
        raise ConfigurationError(f"{name} must be seconds {limit}, got {value!r}")
    return float(value)


def log_started(
    runtime: Runtime,
    queues: tuple[str, ...] | None,
    concurrency: int,
    wake: str,
    poll_interval: float,
    grace: float,
    idle_check: float | None = None,
) -> None:
    """The worker's start line: who it is and how it is set up."""
    import os

    from ._version import __version__

    store, lease = runtime.store, runtime.lease_seconds
    idle = poll_interval if idle_check is None else idle_check
    log.info(
        "tickq %s worker %s started: backend %s %s, queues %s, concurrency %d, wake-up on "
        "%s, poll every %gs, idle look every %gs, lease %gs, grace %gs, %d schedule(s)",
        __version__,
        runtime.owner, store.dialect, where(store.url), ",".join(queues) if queues else "all",
        concurrency, wake, poll_interval, idle, lease, grace, len(runtime.schedules),
        extra={"event": "worker_started", "version": __version__, "owner": runtime.owner,
               "backend": store.dialect, "queues": list(queues or []),
               "concurrency": concurrency, "poll_interval": poll_interval,
               "idle_check": idle,
               "lease_seconds": lease, "grace": grace, "schedules": sorted(runtime.schedules),
               "pid": os.getpid(), "wake_up": wake},
    )  # fmt: skip
