"""Internal: the worker's SIGTERM/SIGINT handling, and flags safe to set from a handler."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
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


_NOTED = ("SIGINT", "SIGTERM", "SIGQUIT", "SIGHUP")


@contextmanager
def noting_signals() -> Iterator[list[int]]:
    """Within: the signals whose Python handler ran, listed. A job running in the main
    thread may meet the process's own ``KeyboardInterrupt`` or ``SystemExit`` (Ctrl-C, a
    server's ``sys.exit`` from its handler): one raised while a signal was handled stops
    the process; one the job raised by itself is that job's failure. Other threads get no
    signals: there nothing is swapped."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    swapped: dict[int, tuple[Any, Any]] = {}
    for name in _NOTED:
        signum = getattr(signal, name, None)
        handler = signal.getsignal(signum) if signum is not None else None
        if signum is None or not callable(handler):
            continue

        def noting(sig: int, frame: Any, handler: Any = handler) -> Any:
            received.append(sig)
            return handler(sig, frame)

        with suppress(ValueError, OSError):
            signal.signal(signum, noting)
            swapped[signum] = (noting, handler)
    try:
        yield received
    finally:
        for signum, (noting, handler) in swapped.items():
            if signal.getsignal(signum) is noting:  # not replaced by the job meanwhile
                signal.signal(signum, handler)
