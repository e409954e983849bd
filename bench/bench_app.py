"""The app every benchmark process loads: one no-op job that logs each run it makes.

``tickq worker bench_app:q`` and the drain processes import it with the database URL in
``TICKQ_BENCH_URL`` and a folder in ``TICKQ_BENCH_LOG_DIR``. Each run of ``noop`` appends
``n start_time`` to ``<folder>/<pid>.log``: one unbuffered ``os.write`` (a few
microseconds), so the log costs far less than a database round trip and still survives a
worker that is stopped with a signal. The benchmark reads the logs back to check that
every job ran exactly once and to time job starts.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tickq import Queue

_sink: dict[str, object] = {"dir": os.environ.get("TICKQ_BENCH_LOG_DIR"), "pid": 0, "fd": -1}


def use_log_dir(folder: str | Path) -> None:
    """Send this process's job log to ``folder`` (the parent process switches per run)."""
    _close_log()
    _sink["dir"] = str(folder)


def _close_log() -> None:
    fd = _sink["fd"]
    if isinstance(fd, int) and fd >= 0 and _sink["pid"] == os.getpid():
        os.close(fd)
    _sink["fd"], _sink["pid"] = -1, 0


def _log_fd() -> int:
    if _sink["pid"] != os.getpid():  # first job in this process (or after a fork)
        folder = _sink["dir"]
        if not folder:
            raise RuntimeError("TICKQ_BENCH_LOG_DIR is not set: the benchmark's job log is off")
        path = os.path.join(str(folder), f"{os.getpid()}.log")
        _sink["fd"] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        _sink["pid"] = os.getpid()
    return int(_sink["fd"])  # type: ignore[call-overload]


def key_of(payload: dict[str, object]) -> str:
    """The ``keyed`` limit's key: one of ``KEYS`` accounts, taking turns."""
    return str(int(payload["n"]) % KEYS)  # type: ignore[call-overload]


KEYS = 100
LIMITS: dict[str, dict[str, object]] = {
    "none": {},
    "concurrency": {"concurrency": 1000},
    "rate": {"rate_limit": "1000000/s"},
    "keyed": {"concurrency": 1000, "concurrency_key": key_of},
    "keyed_each": {"concurrency": 1, "concurrency_key": "n"},
}
"""``TICKQ_BENCH_LIMIT``: the limit ``noop`` declares; each is far above what a run reaches,
so the figures show what checking a limit costs, not a limit holding jobs back. ``keyed``:
per key, over ``KEYS`` keys; ``keyed_each``: one at a time per key, each job its own key
(the most keys a claim can walk)."""


def make_queue(url: str, limit: str | None = None) -> Queue:
    """A Queue on ``url`` with the benchmark's ``noop`` job registered (tickq defaults, and
    the limit ``limit`` or else ``TICKQ_BENCH_LIMIT`` names, if any). A keyed limit's key is
    computed at enqueue: the process that fills the queue registers the same limit."""
    q = Queue(url)

    @q.job(**LIMITS[limit or os.environ.get("TICKQ_BENCH_LIMIT") or "none"])  # type: ignore[call-overload]
    def noop(n: int) -> None:
        os.write(_log_fd(), b"%d %.6f\n" % (n, time.time()))

    @q.job()
    def boom(n: int) -> None:
        """Logs its run like noop, then raises: retried later (an attempt with an error)."""
        os.write(_log_fd(), b"%d %.6f\n" % (n, time.time()))
        raise RuntimeError(f"benchmark failure {n}")

    return q


def read_log(folder: str | Path) -> list[tuple[int, float]]:
    """Every ``(n, start_time)`` the job logged in ``folder``, from all processes."""
    runs = []
    for path in Path(folder).glob("*.log"):
        for line in path.read_text().splitlines():
            n, started = line.split()
            runs.append((int(n), float(started)))
    return runs


def make_alerting_queue(url: str, webhook: str, group_wait: float) -> Queue:
    """``make_queue`` plus alerts to ``webhook`` and a ``fail`` job that fails for good."""
    from datetime import timedelta

    from tickq.alerts import Alerts, Webhook

    q = Queue(url, alerts=Alerts([Webhook(webhook)], group_wait=timedelta(seconds=group_wait)))
    q.job(name="noop")(_noop)

    @q.job(max_attempts=1)
    def fail(n: int) -> None:
        raise RuntimeError(f"benchmark failure {n}")

    return q


def _noop(n: int) -> None:
    os.write(_log_fd(), b"%d %.6f\n" % (n, time.time()))


def _from_env() -> Queue | None:
    url = os.environ.get("TICKQ_BENCH_URL")
    if not url:
        return None
    webhook = os.environ.get("TICKQ_BENCH_ALERT_URL")
    if webhook:
        return make_alerting_queue(url, webhook, float(os.environ["TICKQ_BENCH_GROUP_WAIT"]))
    return make_queue(url)


q = _from_env()
