"""SQLite store: WAL, a busy timeout, and ``BEGIN IMMEDIATE`` so writers queue up."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from datetime import UTC, datetime
from json import dumps
from time import monotonic

from ..errors import (
    DISK_FULL,
    LOCKED,
    READ_ONLY,
    ConfigurationError,
    DatabaseUnavailable,
    SchemaMissing,
)
from .base import SqlStore, decisions, match_inserted, released_error
from .clocks import SQLiteClocks
from .wal import JOURNAL_SIZE_LIMIT, SQLiteWal

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from collections.abc import Collection, Iterator, Sequence
    from typing import Any

    from ..clock import Clock
    from ..job import Job, NewJob
    from .plumbing import Later, Rows, Statement, Wake
    from .records import Outcome, Recorded, ScheduleMove

SYNCHRONOUS = ("off", "normal", "full", "extra")

LIMITS_LOOK = 1.0
"""Seconds between looks at whether any job type is limited (a claim of a limited type's
jobs costs a few statements more, so a process without any skips them)."""
KEY_LOOKS = 64
"""A keyed type's claim looks at most this many keys more than the jobs it wants: a key at
its limit costs one look, and the next claim goes on from where this one stopped."""
WAIT_STEP = 0.1
INCREMENTAL = 2
"""``PRAGMA auto_vacuum``'s answer for INCREMENTAL."""
VACUUM_PAGES = 2000
"""Free pages one pruned batch hands back to the file system at most (8 MB of 4 KB pages)."""
"""A write waits for another writer's lock in steps this long, looking between them for a
lock the calling thread holds itself (which no wait can end)."""


def sqlite_path(url: str) -> tuple[str, dict[str, str]]:
    """``sqlite:///app.db`` -> ``app.db``; ``sqlite:////abs/app.db`` -> ``/abs/app.db``."""
    # Split by hand: urllib.parse costs a waking host milliseconds of import.
    rest = url.partition(":")[2].partition("#")[0]
    rest, _, query = rest.partition("?")
    if rest.startswith("//"):
        host, slash, path = rest[2:].partition("/")
        if host:
            from ..redact import redact_url

            raise ConfigurationError(
                f"SQLite URL {redact_url(url)!r} has a host part; use sqlite:///relative.db or "
                "sqlite:////absolute/path.db (three or four slashes)"
            )
        rest = slash + path
    path = rest[1:] if rest.startswith("/") else rest
    if not path:
        raise ConfigurationError(f"SQLite URL {url!r} names no file; e.g. sqlite:///tickq.db")
    return path, _query_options(query)


def _query_options(query: str) -> dict[str, str]:
    """``timeout=5&synchronous=normal`` -> a dict (the last value of a repeated name wins)."""
    if "%" in query or "+" in query:
        from urllib.parse import parse_qs

        return {k: v[-1] for k, v in parse_qs(query).items()}
    pairs = (p.partition("=") for p in query.split("&") if p)
    return {k: v for k, _, v in pairs if v}


def seconds(name: str, text: str) -> float:
    """A URL option in seconds: ``?timeout=5`` -> 5.0, or one line saying what is wrong."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise ConfigurationError(f"?{name}= must be seconds (a number >= 0), got {text[:40]!r}")
    return value


class SQLiteStore(SQLiteClocks, SQLiteWal, SqlStore):
    """Jobs in a SQLite file. Each thread gets its own connection."""

    dialect = "sqlite"
    paramstyle = "named"
    can_listen = True
    """Commits by other processes are heard by watching the file (``listen``)."""

    def __init__(self, url: str, clock: Clock | None = None) -> None:
        super().__init__(url, clock)
        self.path, options = sqlite_path(url)
        self.busy_timeout = seconds("timeout", options.get("timeout", "30"))
        self.synchronous = options.get("synchronous", "full").lower()
        if self.synchronous not in SYNCHRONOUS:
            raise ConfigurationError(
                f"synchronous must be one of {', '.join(SYNCHRONOUS)}, got {self.synchronous!r}"
            )
        self._limits_seen, self._limits_looked = False, -LIMITS_LOOK
        self._uri = self.path == ":memory:"
        if self._uri:
            self.path = f"file:tickq-{id(self)}?mode=memory&cache=shared"
            self._keepalive = self._connect()  # the shared in-memory database lives with it

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, timeout=min(self.busy_timeout, WAIT_STEP), isolation_level=None,
            check_same_thread=False, uri=self._uri,
        )  # fmt: skip
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        conn.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
        return conn

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.OperationalError as exc:
            message = str(exc)
            if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
                self.tend_wal(full=True)  # give the log's space back for the next try
            if any(m in message for m in ("no such table", "no such column", "has no column")):
                raise SchemaMissing(
                    f"tickq's tables are missing or not up to date in {self.path} ({message}); "
                    "run q.migrate() or `tickq migrate APP` first"
                ) from exc
            if (trouble := self._trouble(exc)) is not None:
                raise trouble from exc
            if "locked" in message or "busy" in message:
                raise DatabaseUnavailable(
                    f"SQLite database {self.path} stayed locked by another writer for "
                    f"{self.busy_timeout:g}s; if your code holds a write transaction on it "
                    "while calling tickq (e.g. a SQLAlchemy session that has flushed), pass "
                    "conn= to enqueue inside it; otherwise try again, or raise ?timeout= in "
                    "the URL",
                    LOCKED,
                ) from exc
            if "unable to open" in message and not self._uri:
                import os.path

                folder = os.path.dirname(os.path.abspath(self.path))
                if not os.path.isdir(folder):
                    raise ConfigurationError(
                        f"cannot open SQLite database {self.path!r}: the folder {folder!r} "
                        "does not exist; create it or fix the path in the URL"
                    ) from exc
                if not os.access(folder, os.W_OK):  # -wal and -shm can't be made there
                    raise DatabaseUnavailable(
                        f"cannot open SQLite database {self.path!r} ({message}): its folder "
                        f"{folder!r} is read-only for this process (a read-only mount?); make "
                        "it writable; tickq tries again on the next call",
                        READ_ONLY,
                    ) from exc
            if "unable to open" in message:
                raise DatabaseUnavailable(
                    f"cannot open SQLite database {self.path!r}: {message}; "
                    "check the folder exists and is writable"
                ) from exc
            raise

    def _trouble(self, exc: sqlite3.OperationalError) -> DatabaseUnavailable | None:
        """A full disk or a file this process can't write, in words; else None."""
        code = _code(exc)
        if code == sqlite3.SQLITE_IOERR and _nearly_none(self._free_now()):
            code = sqlite3.SQLITE_FULL  # opening on a full disk: its -shm can't be made
        if code == sqlite3.SQLITE_FULL:
            return DatabaseUnavailable(
                f"SQLite database {self.path} is out of space: disk full ({exc}): free space "
                "on the disk that holds it (its -wal file grows with each write until a "
                "checkpoint); tickq tries again on the next call",
                DISK_FULL,
            )
        if code == sqlite3.SQLITE_READONLY:
            return DatabaseUnavailable(
                f"SQLite database {self.path} is read-only for this process ({exc}): make "
                "the file, its -wal and -shm files and its folder writable (a read-only "
                "mount?); tickq tries again on the next call",
                READ_ONLY,
            )
        return None

    def _execute(self, conn: sqlite3.Connection, sql: str, params: Any = ()) -> Rows:
        """``conn.execute(sql)`` waiting up to ``busy_timeout`` for another writer's lock,
        in steps; a lock held by the calling thread's own transaction fails fast."""
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            if not _busy(exc):
                raise
        started = monotonic() - WAIT_STEP
        while True:
            self._refuse_own_lock(conn)
            try:
                return conn.execute(sql, params).fetchall()
            except sqlite3.OperationalError as exc:
                if not _busy(exc) or monotonic() - started >= self.busy_timeout:
                    raise

    def _refuse_own_lock(self, conn: sqlite3.Connection) -> None:
        if self._uri:
            return
        from .own_transaction import own_transaction

        holder = own_transaction(self.path, conn)
        if holder is not None:
            raise ConfigurationError(
                f"SQLite database {self.path} is locked by your own open transaction "
                f"({holder}), which cannot commit while tickq waits for it; pass conn= "
                f"(e.g. job.enqueue(..., conn={holder.split()[0]})) to write inside that "
                "transaction"
            )

    @contextmanager
    def _transaction(self, conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        self._settle(conn)  # a tight disk: what others committed taken in first
        self._execute(conn, "BEGIN IMMEDIATE")
        try:
            yield conn
            self._room_to_commit(conn)  # a tight disk: room for the checkpoint after it
            self._execute(conn, "COMMIT")  # busy while readers finish (rollback journal)
            self._settle(conn)  # a tight disk: the log taken in, started over
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    @contextmanager
    def _begin(self, conn: sqlite3.Connection) -> Iterator[None]:
        with self._transaction(conn):
            yield

    def _run(self, conn: sqlite3.Connection, sql: str, params: dict[str, Any]) -> Rows:
        return self._execute(conn, sql, params)

    def _run_many(self, conn: sqlite3.Connection, statements: Sequence[Statement]) -> list[Rows]:
        limited = self._limits_hint(conn, statements)
        alone = len(statements) == 1 and not limited and not self._tight(conn)
        if alone:  # one statement is a transaction of its own (not on a tight disk: see wal)
            name, params = statements[0]
            return [self._execute(conn, self._sql[name], params)]
        with self._transaction(conn):
            return [
                self._claim_limited(conn, p, name == "claim_ahead")
                if limited and name in ("claim", "claim_ahead")
                else conn.execute(self._sql[name], p).fetchall()
                for name, p in statements
            ]  # fmt: skip

    def _limits_hint(self, conn: sqlite3.Connection, statements: Sequence[Statement]) -> bool:
        """Whether a claim among ``statements`` should look for jobs of limited types: read
        from the database at most every ``LIMITS_LOOK`` seconds. A stale answer is safe:
        the plain claims never take a limited type's job, and ``claim_limited`` reads the
        limits themselves in its transaction."""
        now = monotonic()
        claims = any(name in ("claim", "claim_ahead") for name, _ in statements)
        if now < self._limits_looked + LIMITS_LOOK:
            return self._limits_seen and claims
        if not claims:
            return False
        self._limits_seen = bool(self._execute(conn, self._sql["any_limits"])[0][0])
        self._limits_looked = now
        return self._limits_seen

    def _limits_declared(self) -> None:
        self._limits_seen, self._limits_looked = True, monotonic()

    def _claim_limited(
        self, conn: sqlite3.Connection, params: dict[str, Any], ahead: bool = False
    ) -> Rows:
        """The claim, in a transaction: jobs of each limited type first, as many as its
        limits allow now (their starts recorded for rate limits), then the others. A claim
        ``ahead`` takes limited types within their room too (a job waiting in line counts
        as running), rate-limited ones only given ``ahead_wait``: the seconds within which
        the claimer starts each job or gives it back, its start recorded at that time."""
        epoch = datetime.fromisoformat(params["now"]).timestamp()
        wait = params.get("ahead_wait") if ahead else 0.0
        rows: Rows = []
        left = params["limit"]
        for job_type, keyed, rate in conn.execute(self._sql["limited_types"]).fetchall():
            if left <= 0:
                break
            if rate is not None and wait is None:
                continue
            typed = {**params, "type": job_type, "limit": left, "epoch": epoch, "ahead": ahead,
                     "at": epoch + (wait or 0.0)}  # fmt: skip
            got = (
                self._claim_keyed(conn, typed) if keyed
                else self._claim_some(conn, "claim_limited", typed, None)
            )  # fmt: skip
            rows.extend(got)
            left -= len(got)
        if left > 0:
            plain = "claim_ahead" if ahead else "claim"
            rows.extend(conn.execute(self._sql[plain], {**params, "limit": left}).fetchall())
        return rows

    def _claim_some(
        self, conn: sqlite3.Connection, name: str, params: dict[str, Any], key: str | None
    ) -> Rows:
        """Run claim statement ``name``; record the starts of the jobs it claimed."""
        got = conn.execute(self._sql[name], {**params, "key": key}).fetchall()
        if got:
            starts = {"type": params["type"], "epoch": params["epoch"], "key": key,
                      "at": params["at"], "ids": dumps([r[0] for r in got])}  # fmt: skip
            conn.execute(self._sql["forget_starts"], starts)
            conn.execute(self._sql["record_starts"], starts)
        return got

    def _claim_keyed(self, conn: sqlite3.Connection, params: dict[str, Any]) -> Rows:
        """A keyed type's due jobs, as many as each key's limits allow, keys taking turns:
        from the key after the one where its last claim stopped, around to that one, for
        at most ``KEY_LOOKS`` keys more than wanted (the next claim goes on from there)."""
        job_type, left = params["type"], params["limit"]
        cursor = conn.execute(self._sql["key_cursor"], {"type": job_type}).fetchone()
        start = cursor[0] if cursor else None
        key, last, wrapped, looks = start, start, False, KEY_LOOKS + left
        rows: Rows = []
        while left > 0 and looks > 0:
            step = "first_key" if key is None else "next_key"
            key = conn.execute(self._sql[step], {"type": job_type, "after": key}).fetchall()[0][0]
            if key is None:
                if wrapped or start is None:
                    break
                wrapped = True
                continue
            if wrapped and key > start:  # BINARY collation: code point order, as in Python
                break
            looks, last = looks - 1, key
            got = self._claim_some(conn, "claim_keyed", {**params, "limit": left}, key)
            rows.extend(got)
            left -= len(got)
        if last != start:
            conn.execute(self._sql["move_key_cursor"], {"type": job_type, "key": last})
        return rows

    def listen(
        self, wake: Wake, stop: threading.Event, url: str | None = None, later: Later | None = None
    ) -> None:
        """Call ``wake(None)`` once watching, then whenever another connection (another
        process, usually) has committed to the file: ``PRAGMA data_version`` on a
        connection of its own changes then. ``url`` and ``later`` are ignored (a commit
        says nothing of due times: the worker looks, reads ``due_in`` and sleeps until it)."""
        if self._uri:  # an in-memory database: no other process can write to it
            wake(None)
            stop.wait()
            return
        from .filewatch import FileWatch

        conn = self._connect()
        watch = None
        try:
            with self._errors():
                version = _data_version(conn)
                watch = FileWatch(self.path)
                wake(None)
                changed = False
                while not stop.is_set():
                    if not watch.wait(changed):
                        continue  # nothing written, not yet time to look anyway
                    now = _data_version(conn)
                    changed = now != version
                    if changed:
                        version = now
                        wake(None)
        finally:
            if watch is not None:
                watch.close()
            conn.close()

    def _ts(self, value: datetime | None) -> str | None:
        if value is None:
            return None
        return value.astimezone(UTC).isoformat(timespec="microseconds")

    def _decode_ts(self, value: Any) -> datetime | None:
        return datetime.fromisoformat(value) if value else None

    def _queues_param(self, queues: Sequence[str] | None) -> Any:
        return dumps(list(queues)) if queues else None

    def _ids_param(self, ids: Sequence[int]) -> Any:
        return dumps(list(ids))

    # finish returns the jobs it left (finish_settled, no settled read after it: another
    # process hears the commit, no wake-up to send with them).
    SETTLES_IN_FINISH = True
    FINISHING = ("finish", "finish_settled", "add_attempts")

    def _decisions(self, outcomes: Sequence[Outcome]) -> dict[str, Any]:
        # [[id, attempt, due, error, result, seconds], ...]: finish reads it with json_each
        # (SQLite parses the JSON again for each field it reads: only what varies is in
        # it); a delay becomes the due time (SQLite's times are computed here).
        return {"decisions": dumps(decisions(outcomes, self._in))}

    def _insert_chunk(self, jobs: Sequence[NewJob]) -> list[int]:
        if len(jobs) == 1:
            return super()._insert_chunk(jobs)
        # The rows go in by executemany (its loop is sqlite3's own, not a statement run
        # from Python per job), then the ids are read back: new ones are above the last id
        # before (AUTOINCREMENT), and no other writer can add rows inside this transaction.
        now = self._now()
        rows = [self._insert_params(j, now) for j in jobs]
        with self._errors():
            conn = self._connection()
            with self._transaction(conn):
                since = conn.execute(self._sql["last_job_id"]).fetchone()[0]
                conn.executemany(self._sql["insert_without_id"], rows)
                inserted = conn.execute(self._sql["inserted_since"], {"since": since}).fetchall()
        return match_inserted(self, jobs, inserted)

    def _integrity_errors(self) -> tuple[type[BaseException], ...]:
        return (sqlite3.IntegrityError,)

    def record_and_claim(
        self,
        owner: str,
        outcomes: Sequence[Outcome],
        limit: int,
        lease_seconds: float,
        queues: Sequence[str] | None = None,
        durable: bool = True,
        ahead: int = 0,
        started: Sequence[Job] = (),
        ahead_wait: float | None = None,
    ) -> tuple[Recorded, list[Job]]:
        # A process killed after a WAL commit loses nothing, synced or not; and the next
        # synced commit syncs every earlier one (the WAL is appended in order).
        if durable or self.synchronous not in ("full", "extra"):
            return super().record_and_claim(
                owner, outcomes, limit, lease_seconds, queues, True, ahead, started, ahead_wait
            )
        conn = self._connection()
        conn.execute("PRAGMA synchronous=normal")
        try:
            return super().record_and_claim(
                owner, outcomes, limit, lease_seconds, queues, True, ahead, started, ahead_wait
            )
        finally:
            conn.execute(f"PRAGMA synchronous={self.synchronous}")

    def _before_rescue(self) -> None:
        self.tend_wal()  # a big log, or a tight disk: give the log's space back first
        self.note_clock()  # every CLOCK_EVERY s: schedules wait for clocks running behind

    def database_health(self) -> dict[str, Any]:
        return self.wal_state()

    def _rescue_statements(self, now: Any) -> list[Statement]:
        params = self._expiry_params()
        if not self._query("any_expired", **params):
            return []
        # Refunds first: add_expired_attempts then sees only the jobs rescue_expired moves.
        names = ("add_refunded_attempts", "refund_expired", "add_expired_attempts",
                 "rescue_expired")  # fmt: skip
        return [(name, params) for name in names]

    def _release_statements(self, params: dict[str, Any]) -> list[Statement]:
        return [("add_released_attempts", params), ("release", params)]

    def _releases(
        self, jobs: Sequence[Job], ran: Collection[int], grace: float | None
    ) -> dict[str, Any]:
        rows = [[j.id, j.attempts, j.id in ran, released_error(j, grace)] for j in jobs]
        return {"releases": dumps(rows)}

    def _started_params(self, owner: str, jobs: Sequence[Job]) -> dict[str, Any]:
        # [[id, attempt], ...]: the started query reads it with json_each.
        return {"owner": owner, "pairs": dumps([[j.id, j.attempts] for j in jobs])}

    def enqueue_schedules(self, moves: Sequence[ScheduleMove]) -> list[dict[str, int] | None]:
        conn = self._connection()
        results: list[dict[str, int] | None] = []
        with self._errors(), self._transaction(conn):
            for move in moves:
                advance = self._sql["advance_schedule"]
                if not conn.execute(advance, self._move_params(move)).fetchall():
                    results.append(None)
                    continue
                inserted = {}
                for job in move.jobs:
                    rows = conn.execute(self._sql["insert"], self._insert_params(job)).fetchall()
                    if rows:
                        inserted[str(job.unique_key)] = int(rows[0][0])
                results.append(inserted)
        return results

    def _prune_batch(self, cutoff: Any, batch: int) -> int:
        deleted = self._retire("prunable", {"cutoff": cutoff, "batch": batch})
        if deleted:
            self._give_space_back(deleted)
        return deleted

    def _prune_retained_batch(self, params: dict[str, Any]) -> int:
        return self._retire("retained_prunable", params)

    def _give_space_back(self, pruned: int) -> None:
        """With ``auto_vacuum=INCREMENTAL`` (every database tickq creates), hand up to
        ``VACUUM_PAGES`` free pages back to the file system: a few ms, in its own short
        write. A database made before keeps its free pages for reuse (see docs/jobs.md)."""
        conn = self._connection()
        with self._errors():
            if conn.execute("PRAGMA auto_vacuum").fetchone()[0] == INCREMENTAL:
                # A script: stepped once, as execute() does, it frees a single page.
                conn.executescript(f"PRAGMA incremental_vacuum({VACUUM_PAGES})")

    def _retire(self, select: str, params: dict[str, Any]) -> int:
        """Delete the finished jobs the query ``select`` picks, and their attempts (prune,
        the dashboard's delete); what they counted stays in tickq_totals (migration 24)."""
        conn = self._connection()
        with self._errors(), self._transaction(conn):
            ids = dumps([r[0] for r in conn.execute(self._sql[select], params)])
            for name in ("prune_attempts", "prune"):
                deleted = conn.execute(self._sql[name], {"ids": ids}).rowcount
        return max(int(deleted), 0)

    @contextmanager
    def _migrating(self, conn: sqlite3.Connection) -> Iterator[None]:
        if not conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            # Only before the first table: pruning then gives the file's space back.
            conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        self._execute(conn, "PRAGMA journal_mode=WAL")  # outside a transaction
        with self._transaction(conn):  # BEGIN IMMEDIATE: one migrating process at a time
            yield

    def _run_script(self, conn: sqlite3.Connection, sql: str) -> None:
        for statement in split_statements(sql):
            conn.execute(statement)


def _data_version(conn: sqlite3.Connection) -> int:
    """Changes whenever another connection commits to the database (a cheap look: no
    table is read)."""
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def _busy(exc: sqlite3.OperationalError) -> bool:
    """Another connection holds the lock (SQLITE_BUSY and its extended codes)."""
    code = _code(exc)
    return code == sqlite3.SQLITE_BUSY if code is not None else "locked" in str(exc)


def _nearly_none(free: int | None) -> bool:
    """Free bytes so few that an I/O error is taken for a full disk."""
    return free is not None and free < 64 * 1024


def _code(exc: sqlite3.Error) -> int | None:
    """The primary result code of ``exc`` (SQLITE_FULL, SQLITE_READONLY...), if known."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if code is not None else None


def split_statements(script: str) -> list[str]:
    """Split a SQL script into statements (executescript would commit on its own)."""
    statements, current = [], ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    if current.strip() and not all(
        ln.strip().startswith("--") or not ln.strip() for ln in current.splitlines()
    ):
        statements.append(current.strip())
    return statements
