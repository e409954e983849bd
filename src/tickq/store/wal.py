"""SQLite's write-ahead log kept small: a full disk recovers once space returns.

SQLite appends every commit to ``<db>-wal`` and copies it into the database file at a
checkpoint, but never gives the log's space back on its own: a log that grew while a
reader held an old snapshot, or while the disk was full, keeps its size, and on a small
disk that space is what the queue needs to recover. So every connection caps what a reset
log keeps (``journal_size_limit``), and every rescue pass (each tick, a worker's every
second or so) looks at the log's size and the disk's free space: past ``WAL_BOUND``, or
with less free space than the log may still need, it checkpoints and truncates the log
(``wal_checkpoint(TRUNCATE)``), giving its space back.
"""

from __future__ import annotations

import os

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
WAL_SMALL = 1 * MIB
"""A log this small is left alone, however full the disk."""
TIGHT_PAGES = 64
"""On a tight disk a connection checkpoints every this many pages (SQLite's default is
1,000: about 4 MB of log, more than a small disk may have to spare) and keeps no more
than this many pages' worth of log once reset."""


class SQLiteWal(Plumbing):
    """Checkpoint-and-truncate of the log when it is big or the disk is tight."""

    path = ""
    _uri = False
    _tight = False  # the last look found the disk too tight for the log: said once

    def _wal_path(self) -> str | None:
        return None if self._uri else f"{self.path}-wal"

    def wal_state(self) -> dict[str, Any]:
        """The log's size and the disk's free space, in bytes (``stats()["database"]``)."""
        wal = self._wal_path()
        if wal is None:
            return {"wal_bytes": 0, "wal_bound_bytes": WAL_BOUND, "disk_free_bytes": None}
        return {
            "wal_bytes": _size(wal), "wal_bound_bytes": WAL_BOUND,
            "disk_free_bytes": _free(os.path.dirname(os.path.abspath(self.path))),
        }  # fmt: skip

    def tend_wal(self, full: bool = False) -> None:
        """Checkpoint and truncate the log if it is past ``WAL_BOUND`` or the disk's free
        space is less than the log may still need (``full``: a write just found the disk
        full); never raises (a disk that stays full fails the statements around it, which
        say so). On a tight disk this thread's connection also checkpoints more often."""
        state = self.wal_state()
        size, free = state["wal_bytes"], state["disk_free_bytes"]
        tight = full or (free is not None and free < size + JOURNAL_SIZE_LIMIT)
        self._small_log(tight)
        if size <= WAL_SMALL or not (size > WAL_BOUND or tight):
            self._tight = tight and self._tight
            return
        try:
            busy = self._checkpoint()
        except Exception as exc:  # a full disk, or no connection: the next statement says so
            log.debug("tickq could not checkpoint the SQLite log %s: %s", self._wal_path(), exc)
            return
        after = _size(str(self._wal_path()))
        if tight and not self._tight:
            log.warning("tickq: the disk holding %s has %d bytes free; checkpointed and "
                        "truncated its write-ahead log from %d to %d bytes%s", self.path,
                        free, size, after, " (readers held part of it back)" if busy else "",
                        extra={"event": "wal_truncated", "wal_bytes": after})  # fmt: skip
        self._tight = tight

    def _small_log(self, tight: bool) -> None:
        """Checkpoint every ``TIGHT_PAGES`` pages on a tight disk, else SQLite's default."""
        conn = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "tight", False) == tight:
            return
        pages = TIGHT_PAGES if tight else 1000
        limit = TIGHT_PAGES * 4096 if tight else JOURNAL_SIZE_LIMIT
        conn.execute(f"PRAGMA wal_autocheckpoint={pages}")
        conn.execute(f"PRAGMA journal_size_limit={limit}")
        self._local.tight = tight

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
