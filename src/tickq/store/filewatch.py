"""Hear another process commit to a SQLite file, for ``SQLiteStore.listen``.

``PRAGMA data_version`` on a connection of our own changes whenever another connection
commits; it is the truth. Looking at it every few milliseconds would cost an idle worker
more than 1% of a core (each wake-up of a thread costs tens of microseconds), so on Linux
inotify says *when* to look: a commit writes to the database file or its ``-wal``, the
watch hears the write, and we look at once and then every few milliseconds for a short while
(the commit becomes visible only after the writer's sync, a little after its writes).
Without inotify (macOS, or a file inotify can't watch) we simply look every ``POLL``.
"""

from __future__ import annotations

import os
import select
import struct
from time import monotonic, sleep

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

IN_MODIFY = 0x2
IN_DELETE_SELF, IN_MOVE_SELF, IN_IGNORED = 0x400, 0x800, 0x8000
GONE = IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED
EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name)

POLL = 0.01
"""Without inotify: look at data_version this often (10 ms: ~0.5% of a core here)."""
SAFETY = 300.0
"""With inotify: look this often anyway, in case a write went unheard (inotify hears every
local write; an idle worker also looks at the jobs every ``idle_check``). Rare, so that an
idle worker sends no statement at all for minutes."""
GAP, BUSY_GAP = 0.004, 0.01
"""Look at most every GAP, and every BUSY_GAP after a look that found a commit: this
process's own commits are heard too, and a thread woken for each of them would fight a
busy worker for the GIL (a third more CPU per job)."""
STOP_CHECK = 1.0
"""The longest ``wait`` blocks without a look, so the listener hears its stop in time."""
HOT = 0.05
"""After a write is heard, look every GAP for this long: the commit lands only after the
writer's sync, a little after its writes, and a burst of commits keeps it hot."""


class FileWatch:
    """Waits for writes to a SQLite database's files; ``wait`` returns how long until the
    caller should look again. Never raises: anything inotify can't do falls back to
    polling."""

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)
        self.fd = -1
        self.watched = 0
        self.hot_until = self.looked = 0.0
        self.safety_at = monotonic() + SAFETY
        self._libc: Any = None
        self._open()

    @property
    def watching(self) -> bool:
        return self.fd >= 0

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def wait(self, changed: bool = False) -> bool:
        """Block until a write is heard, it is time to look anyway, or ``STOP_CHECK``
        passes; True when the caller should look now. ``changed``: the last look found
        a commit."""
        if self.fd < 0:
            sleep(POLL)
            return True
        gap = self.looked + (BUSY_GAP if changed else GAP) - monotonic()
        if gap > 0:
            sleep(gap)  # writes heard meanwhile wait in the queue: one look for them all
        hot = monotonic() < self.hot_until  # look every GAP
        timeout = 0.0 if hot else max(0.0, min(STOP_CHECK, self.safety_at - monotonic()))
        ready, _, _ = select.select([self.fd], [], [], timeout)
        now = monotonic()
        heard = bool(ready) and self._drain()
        if heard:
            self.hot_until = now + HOT
        if self.watched < 2 and os.path.exists(self.path + "-wal"):
            self._open()  # the -wal appeared (or came back) since: watch it too
        look = hot or heard or now >= self.safety_at
        if look:
            self.looked, self.safety_at = now, now + SAFETY
        return look

    def _drain(self) -> bool:
        """Read every queued event; True when a watched file was written."""
        try:
            data = os.read(self.fd, 64 * 1024)
        except BlockingIOError:
            return False
        except OSError:
            self._open()
            return True
        written, offset = False, 0
        while offset + EVENT.size <= len(data):
            _, mask, _, length = EVENT.unpack_from(data, offset)
            offset += EVENT.size + length
            written = written or bool(mask & IN_MODIFY)
            if mask & GONE:
                self.watched = 0  # a file was replaced or deleted: watch again below
        if not self.watched:
            self._open()
            written = True
        return written

    def _open(self) -> None:
        self.close()
        self.watched = 0
        libc = self._load()
        if libc is None:
            return
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            return
        for name in (self.path, self.path + "-wal"):
            if libc.inotify_add_watch(fd, os.fsencode(name), IN_MODIFY | GONE) >= 0:
                self.watched += 1
        if self.watched:
            self.fd = fd
        else:
            os.close(fd)

    def _load(self) -> Any:
        if self._libc is None:
            try:
                import ctypes

                libc: Any = ctypes.CDLL(None, use_errno=True)
                libc.inotify_init1, libc.inotify_add_watch  # noqa: B018 (Linux only)
            except (OSError, AttributeError, ImportError):
                libc = False
            self._libc = libc
        return self._libc or None
