"""Internal: the worker's LISTEN/NOTIFY thread, which hears enqueues made by other processes.

On Postgres a thread holds a connection in LISTEN and calls ``heard(queues)`` for each
enqueue (``heard(None)`` on every (re)connect: anything enqueued meanwhile went unheard),
and ``later(queue, seconds)`` for a job put in line to come due that much later (enqueued
with a delay, or retried or snoozed by any process).
Behind a transaction pooler LISTEN hears nothing, so it needs a direct ``listen_url``;
without one the worker polls instead.

A LISTEN connection the server closes (a serverless database suspending its compute after
minutes without queries does) is not opened again at once: that would wake the database
it just let sleep. It is opened again when the worker next talks to the database
(``resume``), at its next look; an idle worker looks at least every ``idle_check``, so a
job enqueued meanwhile waits no longer than that.
"""

from __future__ import annotations

import os
import threading

from .lease import leave_signals_to_main_thread
from .logger import log
from .trouble import Trouble
from .worker_options import where

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from .store import SqlStore
    from .store.plumbing import Later


class Listener:
    """LISTEN on ``listen_url`` (or ``$TICKQ_LISTEN_URL``, or the store's own connection)."""

    def __init__(
        self,
        store: SqlStore,
        listen_url: str | None,
        heard: Callable[[set[str] | None], None],
        later: Later | None = None,
    ) -> None:
        self.store, self.heard, self.later = store, heard, later
        self.listen_url = listen_url or os.environ.get("TICKQ_LISTEN_URL") or None
        self.listens = store.can_listen and bool(self.listen_url or not store.transaction_pooled)
        if self.listen_url and store.can_listen:
            self.listen_url = store.direct_url(self.listen_url)
        self.stopped = threading.Event()
        self._needed = threading.Event()  # the worker talked to the database: LISTEN again
        self._heard = False  # listening worked once: a loss waits for the worker's look
        self._trouble = Trouble("LISTEN connection", quiet_first=True)
        self._announced = False  # the "listening" line is logged once

    def start(self) -> None:
        if self.listens:
            threading.Thread(target=self._listen, name="tickq-listen", daemon=True).start()

    def stop(self) -> None:
        self.stopped.set()
        self._needed.set()

    def resume(self) -> None:
        """The worker just reached the database: a lost LISTEN connection may reconnect."""
        self._needed.set()

    def went_deaf(self) -> bool:
        """True (once) when the store has only now found a transaction pooler, where LISTEN
        hears nothing: the listener stops and the worker must poll."""
        if not (self.listens and not self.listen_url and self.store.transaction_pooled):
            return False
        self.listens = False
        self.stop()
        return True

    def wake_up(self) -> str:
        """How the worker hears of new jobs, in words for its start line."""
        if not self.store.can_listen:
            return "in-process enqueues"
        if self.store.dialect == "sqlite":
            return "commits to the file (watched; PRAGMA data_version)"
        if self.listen_url:
            return f"LISTEN/NOTIFY on a direct connection to {where(self.listen_url)}"
        if not self.listens:
            return (
                "polling only (behind a transaction pooler LISTEN hears nothing; give the "
                "worker a direct connection with listen_url= or TICKQ_LISTEN_URL)"
            )
        return "LISTEN/NOTIFY"

    def _listen(self) -> None:
        leave_signals_to_main_thread()
        while not self.stopped.is_set():
            try:
                self.store.listen(self._listening, self.stopped, self.listen_url, self.later)
            except Exception as exc:
                pause = self._trouble.happened(exc)
                if self._heard and not self.stopped.is_set():
                    self._heard = False
                    self._wait_for_worker(exc)
                self.stopped.wait(pause)

    def _wait_for_worker(self, exc: Exception) -> None:
        self._needed.clear()
        log.info("tickq worker: the LISTEN connection closed (%s); listening again when "
                 "the worker next needs the database (it looks at least every idle_check "
                 "meanwhile)", str(exc).strip().splitlines()[0] if str(exc).strip() else
                 type(exc).__name__, extra={"event": "listen_lost"})  # fmt: skip
        self._needed.wait()

    def _listening(self, queues: set[str] | None) -> None:
        self._heard = True
        # None: (re)connected, or on SQLite any commit by another connection: look.
        if queues is None and not self._trouble.over() and not self._announced:
            self._announced = True
            log.info("tickq worker listening for enqueues (%s)", self.wake_up(),
                     extra={"event": "listening"})  # fmt: skip
        self.heard(queues)
