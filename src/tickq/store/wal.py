"""SQLite's write-ahead log kept small: a full disk recovers once space returns.

SQLite appends every commit to ``<db>-wal`` and copies it into the database file at a
checkpoint, but never gives the log's space back on its own: a log that grew while a
reader held an old snapshot, or while the disk was full, keeps its size. Worse, a
checkpoint needs room for the pages the log adds to the database file: once the log has
taken the last free bytes (a write that failed on a full disk leaves its frames in the
file), no checkpoint can finish, and nothing recovers until more space than the log holds
is freed. So:

- every connection caps what a reset log keeps (``journal_size_limit``);
- every time a thread takes its connection it looks at the disk's free space (one
  ``statvfs``): below ``TIGHT_FREE`` that connection checkpoints after every commit and
  keeps only ``TIGHT_PAGES`` pages of log once reset; its write transactions are also
  preceded and followed by ``wal_checkpoint(RESTART)``, which waits for readers of older
  snapshots (overlapping readers otherwise starve the automatic checkpoint, and the log
  grows anyway), so the log holds nothing the database file has yet to take in;
- a commit on a tight disk that adds pages to the database is refused (rolled back,
  ``DatabaseUnavailable``) unless the disk has room for them twice: once in the log, once
  in the database file at the checkpoint;
- every rescue pass (each tick, a worker's every second or so), and every write that
  found the disk full, checkpoints and truncates the log
  (``wal_checkpoint(TRUNCATE)``) when it is past ``WAL_BOUND``, or past ``WAL_SMALL`` on
  a tight disk, or at all on a full one, giving its space back.
"""

from __future__ import annotations

import os
import sqlite3
from time import monotonic, sleep

from ..errors import DISK_FULL, DatabaseUnavailable
from ..logger import log
from .plumbing import Plumbing

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MIB = 1024 * 1024
JOURNAL_SIZE_LIMIT = 4 * MIB
"""Bytes a log keeps once reset (``PRAGMA journal_size_limit``): about what SQLite's
automatic checkpoint, every 1,000 pages, lets it reach."""
WAL_BOUND = 16 * MIB
"""A log past this size is checkpointed and truncated, whatever the free space."""
TIGHT_FREE = 3 * JOURNAL_SIZE_LIMIT
"""A disk with less free space than this is tight. Checkpointing every 1,000 pages, a log
can grow by about ``JOURNAL_SIZE_LIMIT`` (more while readers hold the checkpoint back),
and the checkpoint may need as much again for the database file: twice that, and a margin,
is what a disk must have to spare before SQLite's defaults are safe."""
TIGHT_PAGES = 64
"""Pages (of SQLite's default 4 KiB) of log a connection keeps once reset on a tight disk:
room a small transaction is written into without asking the disk for more."""
WAL_SMALL = TIGHT_PAGES * 4096
"""A log this small is left alone on a tight disk (not on a full one)."""
SETTLE_WAIT = 1.0
"""Seconds a write on a tight disk tries to have the log taken in before and after it
(another connection's checkpoint running, or readers of an old snapshot, make it wait)."""
SPARE_PAGES = 16
"""Pages of room a commit on a tight disk must leave besides what its new pages take:
for the log's copies of the pages it changed."""


class SQLiteWal(Plumbing):
    """Checkpoint-and-truncate of the log when it is big or the disk is tight."""

    path = ""
    _uri = False
    _folder = ""
    _said = False  # a truncation on this tight disk was logged: once per episode
    _stuck = False  # the last checkpoint failed on a full disk: said once

    def _wal_path(self) -> str | None:
        return None if self._uri else f"{self.path}-wal"

    def _free_now(self) -> int | None:
        """The free bytes of the disk holding the database; None in memory, or unknown."""
        if self._uri:
            return None
        if not self._folder:
            self._folder = os.path.dirname(os.path.abspath(self.path))
        return _free(self._folder)

    def wal_state(self) -> dict[str, Any]:
        """The log's size and the disk's free space, in bytes (``stats()["database"]``)."""
        wal = self._wal_path()
        if wal is None:
            return {"wal_bytes": 0, "wal_bound_bytes": WAL_BOUND, "disk_free_bytes": None}
        return {"wal_bytes": _size(wal), "wal_bound_bytes": WAL_BOUND,
                "disk_free_bytes": self._free_now()}  # fmt: skip

    def _connection(self) -> Any:
        """This thread's connection, set to checkpoint after every commit while the disk
        is tight (looked at on every call: a ``statvfs``, about a microsecond)."""
        conn = super()._connection()
        free = self._free_now()
        tight = free is not None and free < TIGHT_FREE
        if tight != self._tight(conn):
            pages, limit = (1, WAL_SMALL) if tight else (1000, JOURNAL_SIZE_LIMIT)
            conn.execute(f"PRAGMA wal_autocheckpoint={pages}")
            conn.execute(f"PRAGMA journal_size_limit={limit}")
            self._local.tight_conn = conn if tight else None
        return conn

    def _tight(self, conn: Any) -> bool:
        """Whether ``conn`` was set up for a tight disk when last taken."""
        return getattr(self._local, "tight_conn", None) is conn

    def _room_to_commit(self, conn: Any) -> None:
        """Raise ``DatabaseUnavailable`` (the caller rolls back) when this connection's
        disk is tight and has no room for what its open transaction adds to the database,
        twice: committed to the log, those pages would wait there for a checkpoint that
        can't grow the database file, and every write after would fail until more space
        than the log holds is freed."""
        if not self._tight(conn):
            return
        free = self._free_now()
        page = int(conn.execute("PRAGMA page_size").fetchone()[0])
        pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
        growth = pages * page - _size(self.path)  # what the next checkpoint adds to the file
        needed = 2 * growth + SPARE_PAGES * page
        if free is None or growth <= 0 or free >= needed:
            return
        raise DatabaseUnavailable(
            f"SQLite database {self.path} is out of space: disk full (nearly: {free} bytes "
            f"free; this write needs about {needed}); nothing was written: free some space "
            "on that disk, or write fewer jobs at a time",
            DISK_FULL,
        )

    def _settle(self, conn: Any) -> None:
        """Before a write transaction and after its commit, on a tight disk:
        ``wal_checkpoint(RESTART)``, waiting (up to the connection's busy timeout) for
        readers of older snapshots, so the database file has taken in everything the log
        holds and the next write starts the log over, in the room it already has.
        Without it, readers that overlap keep the automatic checkpoint from finishing, and
        the log grows into the room the database file needs for that checkpoint. Busy
        (another connection's checkpoint runs, or readers stay), it tries again for up to
        ``SETTLE_WAIT`` seconds; then the next write, or the rescue pass, does."""
        if not self._tight(conn):
            return
        deadline = monotonic() + SETTLE_WAIT
        while True:
            try:
                busy = conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()[0]
            except sqlite3.Error:  # a full disk: the commit, or the next rescue pass, says so
                return
            if not busy or monotonic() >= deadline:
                return
            sleep(0.01)

    def tend_wal(self, full: bool = False) -> None:
        """Checkpoint and truncate the log if it is past ``WAL_BOUND``, past ``WAL_SMALL``
        on a tight disk, or at all when ``full`` (a write just found the disk full); never
        raises (a disk that stays full fails the statements around it, which say so)."""
        state = self.wal_state()
        size, free = state["wal_bytes"], state["disk_free_bytes"]
        tight = full or (free is not None and free < TIGHT_FREE)
        if not (size > WAL_BOUND or (tight and size > WAL_SMALL) or (full and size)):
            self._said = tight and self._said
            return
        try:
            busy = self._checkpoint()
        except Exception as exc:  # a full disk, or no connection: the next statement says so
            self._cannot_checkpoint(exc, size)
            return
        self._stuck = False
        after = _size(str(self._wal_path()))
        if busy:  # readers kept it from truncating: the next pass tries again
            log.debug("tickq: readers kept the SQLite log %s (%d bytes) from being truncated",
                      self._wal_path(), size)  # fmt: skip
        elif tight and not self._said:
            log.warning("tickq: the disk holding %s has %d bytes free; checkpointed and "
                        "truncated its write-ahead log from %d to %d bytes", self.path,
                        free, size, after,
                        extra={"event": "wal_truncated", "wal_bytes": after})  # fmt: skip
            self._said = True
        self._said = tight and self._said

    def _cannot_checkpoint(self, exc: Exception, size: int) -> None:
        """Say once per episode that the log can't be checkpointed for want of space."""
        if "full" not in str(exc) or self._stuck:
            log.debug("tickq could not checkpoint the SQLite log %s: %s", self._wal_path(), exc)
            return
        self._stuck = True
        log.warning("tickq: the disk holding %s is full: its write-ahead log (%d bytes) "
                    "can't be copied into the database file, which needs room to grow; "
                    "free some space on that disk (the queue resumes by itself)", self.path,
                    size, extra={"event": "wal_stuck", "wal_bytes": size})  # fmt: skip

    def _checkpoint(self) -> bool:
        """``PRAGMA wal_checkpoint(TRUNCATE)`` on this thread's connection; True when
        readers or a writer kept it from finishing (it then truncated nothing)."""
        conn = self._connection()
        if conn.in_transaction:
            return True
        row = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return bool(row and row[0])


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _free(folder: str) -> int | None:
    try:
        st = os.statvfs(folder)
    except (OSError, AttributeError):  # statvfs: not on Windows
        return None
    return st.f_bavail * st.f_frsize
