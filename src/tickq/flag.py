"""Internal: the worker's stop and wake-up flags, safe to set from a signal handler."""

from __future__ import annotations

import threading


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
