"""Internal: the worker's SIGTERM/SIGINT handling, and flags safe to set from a handler."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def handling_signals(handler: Callable[[int, Any], None]) -> Iterator[None]:
    """Send SIGTERM and SIGINT to ``handler`` within the block (main thread only: signals
    reach no other; a worker on another thread is stopped with ``stop=``)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


class Flag:
    """``threading.Event`` on a re-entrant lock: the signal handler sets the worker's flags
    while the main thread it interrupted may be inside one of their methods, holding the
    lock (a plain Event would deadlock there)."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.RLock())
        self._flag = False

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        with self._cond:
            self._flag = True
            self._cond.notify_all()

    def clear(self) -> None:
        with self._cond:
            self._flag = False

    def wait(self, timeout: float | None = None) -> bool:
        with self._cond:
            if not self._flag:
                self._cond.wait(timeout)
            return self._flag
