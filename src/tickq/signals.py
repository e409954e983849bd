"""Internal: the worker's SIGTERM/SIGINT handling, flags safe to set from a handler, and
telling a signal's exception from the same exception raised by a job."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

TYPE_CHECKING = False  # typing costs a waking host's `tickq tick` its import
if TYPE_CHECKING:
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


_MARK = "_tickq_raised_by_signal"
_SIGNALS = sorted(signal.valid_signals())  # fixed for the process; costly to ask per job


class _Noting:
    """A signal's own Python handler, run as before; whatever it raises is marked as the
    process's, so ``raised_by_signal`` can tell it from the same exception raised by a job."""

    __slots__ = ("handler",)

    def __init__(self, handler: Callable[[int, Any], Any]) -> None:
        self.handler = handler

    def __call__(self, signum: int, frame: Any) -> Any:
        try:
            return self.handler(signum, frame)
        except BaseException as exc:
            with suppress(AttributeError, TypeError):
                setattr(exc, _MARK, signum)
            raise


@contextmanager
def noting_signals() -> Iterator[None]:
    """Within: every signal with a Python handler (SIGINT, a server's SIGTERM, gunicorn's
    SIGABRT on a worker timeout, ...) runs it through ``_Noting``, so an exception such a
    handler raises is known as the process's (``raised_by_signal``). A handler that only
    sets a flag (a graceful SIGTERM) marks nothing: a ``SystemExit`` the job raises later
    is still the job's failure.

    Swapped for the block and put back after, rather than once per process: a permanent
    wrapper around ``signal.default_int_handler`` would stop every later ``asyncio.run``
    in this process from installing its Ctrl-C handler (it installs one only when SIGINT's
    handler *is* the default). Other threads get no signals: there nothing is swapped."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    swapped: dict[int, tuple[_Noting, Any]] = {}
    for signum in _SIGNALS:
        handler = signal.getsignal(signum)
        if callable(handler) and not isinstance(handler, _Noting):
            noting = _Noting(handler)
            with suppress(ValueError, OSError):
                signal.signal(signum, noting)
                swapped[signum] = (noting, handler)
    try:
        yield
    finally:
        for sig, (noting, handler) in swapped.items():
            if signal.getsignal(sig) is noting:  # not replaced by the job meanwhile
                signal.signal(sig, handler)


def raised_by_signal(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by a signal handler within ``noting_signals``, or while
    handling such an exception (a job that catches the process's ``KeyboardInterrupt`` and
    raises something else): the process is being stopped, not the job failing."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if hasattr(current, _MARK):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
