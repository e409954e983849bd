"""PostgreSQL store (psycopg 3): ``FOR UPDATE SKIP LOCKED`` claims, pipelined writes.

The only module that imports psycopg, and only when a Postgres URL is used.
"""

from __future__ import annotations

import select
import threading
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..clock import Clock, SystemClock
from ..errors import UNREACHABLE, ConfigurationError, DatabaseUnavailable, SchemaMissing
from ..job import Job, NewJob
from ..logger import log
from ..redact import redact_url, url_location
from .base import CHUNK, SqlStore, decisions, id_of, match_inserted, released_error
from .horizon import PostgresHorizon
from .pgerrors import reason_of, too_large, unavailable
from .pooler import guess_pooler, split_pooler
from .queries import WAKE_SEPARATOR

if TYPE_CHECKING:
    from collections.abc import Callable

    from .plumbing import Later, Rows, Statement, Wake
    from .records import Outcome, ScheduleMove

LISTEN_HEARTBEAT = 30.0
"""Seconds of silence after which the kernel probes an idle LISTEN connection (TCP
keepalives: a half-open connection would otherwise go quiet forever). No query is sent,
so a serverless database that suspends after minutes without one may still sleep."""
KEEPALIVES = {"keepalives": 1, "keepalives_idle": int(LISTEN_HEARTBEAT),
              "keepalives_interval": 10, "keepalives_count": 3}  # fmt: skip


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise ConfigurationError(
            "a postgresql:// URL needs the Postgres driver: pip install 'tickq[postgres]'"
        ) from exc
    return psycopg


def check_url(psycopg: Any, url: str) -> None:
    """Refuse a URL libpq cannot parse, in one line that never shows its password."""
    try:
        psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        # libpq quotes the offending part, which may be the password: keep only the reason.
        reason = str(exc).split('"')[0].strip().rstrip(":")
        hint = "; write a '%' in a password as %25" if "percent" in reason else ""
        raise ConfigurationError(
            f"invalid PostgreSQL URL {redact_url(url)!r}: {reason}{hint}"
        ) from None


def login_refused(message: str) -> str | None:
    """What to do when the server refused this database or login: not a passing outage."""
    if "does not exist" in message and "FATAL:  database" in message:
        name = message.split('database "', 1)[-1].split('"', 1)[0]
        return (
            f"has no database {name!r}: create it (createdb {name}, or CREATE DATABASE in "
            "psql) or fix the database name in the URL"
        )
    if "FATAL:  role" in message and "does not exist" in message:
        return "has no such user (role): create it, or fix the user name in the URL"
    if "password authentication failed" in message or "no pg_hba.conf entry" in message:
        return "refused the login: check the user and password in the URL (and pg_hba.conf)"
    return None


def normalise_url(url: str) -> str:
    """Accept SQLAlchemy-style ``postgresql+psycopg://`` and ``postgres://`` too."""
    scheme, sep, rest = url.partition("://")
    return f"postgresql{sep}{rest}" if scheme.startswith(("postgresql+", "postgres")) else url


class PoolerLostStatement(DatabaseUnavailable):
    """A transaction pooler lost or mixed up a prepared statement; safe to send again."""


class PostgresStore(PostgresHorizon, SqlStore):
    """Jobs in a Postgres table; several workers on several machines share it safely.

    ``pooler`` (``?pooler=`` on the URL, see ``store.pooler``) is ``transaction`` behind a
    transaction pooler: no prepared statements, and LISTEN only on a direct connection.
    """

    dialect = "postgres"
    paramstyle = "pyformat"
    can_listen = True

    def __init__(self, url: str, clock: Clock | None = None) -> None:
        url, pooler = split_pooler(normalise_url(url))
        super().__init__(url, clock)
        self.pooler = pooler or guess_pooler(url)
        self.psycopg = _psycopg()
        check_url(self.psycopg, self.url)

    @property
    def transaction_pooled(self) -> bool:
        """True behind a transaction pooler (LISTEN there hears nothing)."""
        return self.pooler == "transaction"

    def _db_clock(self) -> bool:
        return isinstance(self.clock, SystemClock)

    def _connect(self, direct: str | None = None, **options: Any) -> Any:
        url = direct or self.url
        # A URL's own application_name wins (DBAs use it to tell processes apart).
        named = "application_name" in self.psycopg.conninfo.conninfo_to_dict(url)
        extra: dict[str, Any] = {} if named else {"application_name": "tickq"}
        if self.transaction_pooled and not direct:
            extra["prepare_threshold"] = None  # prepared statements live per server connection
        return self.psycopg.connect(url, autocommit=True, connect_timeout=10, **extra, **options)

    def direct_url(self, url: str) -> str:
        """``url`` checked as a Postgres URL to listen on (``listen_url``)."""
        direct = split_pooler(normalise_url(url))[0]
        try:
            self.psycopg.conninfo.conninfo_to_dict(direct)
        except self.psycopg.ProgrammingError as exc:
            shown = direct.split("@")[-1]
            raise ConfigurationError(
                f"listen_url must be a postgresql:// URL of the same database, got {shown!r} "
                f"({_first_line(exc)})"
            ) from exc
        return direct

    def _query(self, name: str, **params: Any) -> Rows:
        try:
            return super()._query(name, **params)
        except PoolerLostStatement:
            return super()._query(name, **params)  # the statement never ran: send it again

    def _query_many(self, statements: Sequence[Statement]) -> list[Rows]:
        try:
            return super()._query_many(statements)
        except PoolerLostStatement:
            return super()._query_many(statements)  # none ran (one implicit transaction)

    def _pooler_lost_statement(self, exc: Exception) -> PoolerLostStatement:
        """Switch to transaction-pooler mode for good: no more prepared statements."""
        self.drop_connection()
        where = self._where()
        if not self.transaction_pooled:
            self.pooler = "transaction"
            log.warning(
                "tickq: PostgreSQL at %s reports a prepared statement lost or duplicated "
                "(%s): a transaction pooler (e.g. pgbouncer pool_mode=transaction) sits in "
                "front of it; tickq prepares no more statements. Add ?pooler=transaction to "
                "the database URL to say so from the start", where, _first_line(exc),
                extra={"event": "pooler_detected"},
            )  # fmt: skip
        return PoolerLostStatement(
            f"PostgreSQL at {where} lost a prepared statement behind a transaction pooler "
            f"({_first_line(exc)}); tickq no longer prepares statements and sends it again"
        )

    def _connection(self) -> Any:
        """This thread's connection, replaced first if the server has hung up on it.

        After a restart, a failover or ``pg_terminate_backend`` the old connection is dead
        but nobody knows until it is used, so the first call would fail. A connection that
        is idle (tickq's are in autocommit: no transaction is open between calls) and has
        something to read was sent a goodbye (an error and EOF): it is replaced before
        anything is sent on it, so nothing can run twice."""
        conn = super()._connection()
        if hung_up(conn):
            self.drop_connection()
            conn = super()._connection()
            log.info("tickq: PostgreSQL at %s had closed this process's idle connection; "
                     "reconnected", self._where(), extra={"event": "reconnected"})  # fmt: skip
        return conn

    @contextmanager
    def _errors(self) -> Iterator[None]:
        errors = self.psycopg.errors
        try:
            yield
        except (errors.DuplicatePreparedStatement, errors.InvalidSqlStatementName) as exc:
            raise self._pooler_lost_statement(exc) from exc
        except (errors.UndefinedTable, errors.UndefinedFunction, errors.UndefinedColumn) as exc:
            raise SchemaMissing(
                f"tickq's tables are missing in this database, or not up to date "
                f"({exc.diag.message_primary}); run q.migrate() or `tickq migrate APP` first"
            ) from exc
        except errors.PipelineAborted as exc:
            self.drop_connection()
            raise DatabaseUnavailable(
                f"PostgreSQL at {self._where()} aborted a batch of statements after an "
                f"earlier one failed ({_first_line(exc)}); tickq reconnects and tries again"
            ) from exc
        except self.psycopg.Error as exc:
            if (meant := self._meaning(exc)) is None:
                raise
            raise meant from exc

    def _meaning(self, exc: Exception) -> Exception | None:
        """What ``exc`` means in tickq's words (None: itself, e.g. a unique clash)."""
        why = _first_line(exc)
        if (large := too_large(exc, why)) is not None:
            return large
        pooled = isinstance(exc, self.psycopg.errors.ProtocolViolation)
        if pooled and "prepared statement" in str(exc):
            # "bind message supplies 10 parameters, but prepared statement "_pg3_0"
            # requires 2": another client's statement of that name on a pooled server
            # connection. The bind failed, so the statement never ran.
            return self._pooler_lost_statement(exc)
        reason = reason_of(exc)
        if reason is None and not isinstance(exc, self.psycopg.OperationalError):
            return None
        self.drop_connection()  # after a failover a new connection may reach the primary
        if reason is None and (refused := login_refused(str(exc))):
            return ConfigurationError(f"PostgreSQL at {self._where()} {refused}")
        return unavailable(self._where(), reason or UNREACHABLE, why)

    def _where(self) -> str:
        return url_location(self.url)

    @contextmanager
    def _begin(self, conn: Any) -> Iterator[None]:
        try:
            with conn.transaction():
                yield
        except BaseException:
            self._forget(conn)
            raise

    def _run(self, conn: Any, sql: str, params: dict[str, Any]) -> Rows:
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall() if cur.description else []
        except BaseException:
            self._forget(conn)
            raise

    def _forget(self, conn: Any) -> None:
        """A statement failed on ``conn``: never use it again. psycopg counts a statement
        sent in a pipeline that the server then aborted as prepared (it never was): on the
        same connection its next use fails with 'prepared statement "_pg3_1" does not
        exist', which is no pooler's doing. A new connection starts with nothing prepared,
        so a lost statement is only ever seen on a connection with no failure behind it."""
        current: Any = getattr(self._local, "conn", None)
        if current is None or conn is not current:
            return
        status = self.psycopg.pq.TransactionStatus
        if conn.info.transaction_status in (status.INTRANS, status.INERROR):
            return  # inside a block (a migration): its end rolls back, then it is dropped
        self.drop_connection()

    def _run_many(self, conn: Any, statements: Sequence[Statement]) -> list[Rows]:
        if len(statements) == 1:
            name, params = statements[0]
            return [self._run(conn, self._sql[name], params)]
        try:
            return self._pipeline(conn, statements)
        except BaseException:
            self._forget(conn)
            raise

    def _pipeline(self, conn: Any, statements: Sequence[Statement]) -> list[Rows]:
        # One implicit transaction and one round trip: an explicit conn.transaction() here
        # would make psycopg sync around BEGIN and COMMIT (four round trips).
        cursors = []
        with conn.pipeline():
            for name, params in statements:
                cur = conn.cursor()
                cur.execute(self._sql[name], params)
                cursors.append(cur)
        return [cur.fetchall() if cur.description else [] for cur in cursors]

    def listen(
        self, wake: Wake, stop: threading.Event, url: str | None = None, later: Later | None = None
    ) -> None:
        """LISTEN on a connection of its own (to ``url`` when given: a direct one, where
        the main URL goes through a transaction pooler); ``wake(None)`` once listening (to
        catch what was enqueued while not), then ``wake({queue})`` per notification of a
        job due now and ``later(queue, seconds)`` per one of a job due later."""
        channel = self._query("channel")[0][0]  # named after this table, as the enqueues see it
        with self._errors():
            conn = self._connect(self.direct_url(url) if url else None, **KEEPALIVES)
        try:
            with self._errors():
                conn.execute(self.psycopg.sql.SQL("LISTEN {}").format(
                    self.psycopg.sql.Identifier(channel)))  # fmt: skip
                wake(None)
                self._relay(conn, wake, stop, later)
        finally:
            conn.close()

    def _relay(self, conn: Any, wake: Wake, stop: threading.Event, later: Later | None) -> None:
        # No query while idle: the server's goodbye (or a keepalive's failure) ends
        # notifies() with an error, and the listener opens a new connection.
        while not stop.is_set():
            for note in conn.notifies(timeout=1.0):
                queue, due_in = parse_note(note.payload)
                if due_in > 0 and later is not None:
                    later(queue, due_in)
                else:
                    wake({queue})

    def _undurable_statements(self) -> list[Statement]:
        return [("commit_unflushed", {})]

    def _decisions(self, outcomes: Sequence[Outcome]) -> dict[str, Any]:
        # Array literals lined up with :ids (ascending), each job's element read by
        # subscript in finish (psycopg's list dumper costs ~0.5 µs an element); a column
        # with no value in it (no delay, error or result) as one NULL. The outcomes are of
        # one kind, whose row of the state machine is in the statement (by_kind).
        ids, attempts, delays, errors, results, seconds = zip(*decisions(outcomes), strict=True)
        return {
            "ids": number_array(ids), "attempts": number_array(attempts),
            "delays": _or_null(number_array, delays), "errors": _or_null(text_array, errors),
            "results": _or_null(text_array, results), "seconds": number_array(seconds),
        }  # fmt: skip

    def _releases(
        self, jobs: Sequence[Job], ran: Collection[int], grace: float | None
    ) -> dict[str, Any]:
        jobs = sorted(jobs, key=id_of)  # ids ascending: see queries.of_job
        return {
            "ids": number_array([j.id for j in jobs]),
            "attempts": number_array([j.attempts for j in jobs]),
            "ran": bool_array([j.id in ran for j in jobs]),
            "errors": text_array([released_error(j, grace) for j in jobs]),
        }

    def _decode_ts(self, value: Any) -> datetime | None:
        return value.astimezone(UTC) if value is not None else None

    def _integrity_errors(self) -> tuple[type[BaseException], ...]:
        return (self.psycopg.IntegrityError,)

    def _insert_chunk(self, jobs: Sequence[NewJob]) -> list[int]:
        if len(jobs) == 1:
            return super()._insert_chunk(jobs)
        rows = self._query("insert_many", **insert_many_params(self, jobs))
        return match_inserted(self, jobs, rows)

    def _start_tick_statements(self, params: dict[str, Any]) -> list[Statement]:
        return [("start_tick", params)]

    def _move_params(self, move: ScheduleMove) -> dict[str, Any]:
        return {**insert_many_params(self, move.jobs), **super()._move_params(move)}

    @contextmanager
    def _migrating(self, conn: Any) -> Iterator[None]:
        # Nothing a migration runs is worth preparing (its bookkeeping insert runs once a
        # version): a prepared statement would outlive it on a pooled server connection.
        threshold, conn.prepare_threshold = conn.prepare_threshold, None
        try:
            with conn.transaction():
                conn.execute(  # one migrating process per schema at a time
                    "SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.tickq_migrate'))"
                )
                yield
        finally:
            conn.prepare_threshold = threshold

    def _run_script(self, conn: Any, sql: str) -> None:
        conn.execute(sql)  # no parameters: a script's % signs stay as written


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def hung_up(conn: Any) -> bool:
    """True when an idle connection is closed, broken, or has unread input (which, with
    no LISTEN on it, can only be the server's goodbye)."""
    if conn.closed or conn.broken:
        return True
    try:
        return bool(select.select([conn.fileno()], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def number_array(numbers: Sequence[float | None]) -> str:
    """A Postgres array literal of numbers (psycopg's list dumper costs ~0.5 µs a number)."""
    if None not in numbers:
        return "{" + ",".join(map(str, numbers)) + "}"
    return "{" + ",".join("NULL" if n is None else str(n) for n in numbers) + "}"


def _or_null(literal: Callable[[Sequence[Any]], str], values: Sequence[Any]) -> str | None:
    """``literal(values)``, or None (a NULL array: every element NULL) when all are None."""
    return None if values.count(None) == len(values) else literal(values)


def bool_array(flags: Sequence[bool]) -> str:
    """A Postgres array literal of booleans."""
    return "{" + ",".join("t" if f else "f" for f in flags) + "}"


def insert_many_params(store: SqlStore, jobs: Sequence[NewJob]) -> dict[str, Any]:
    """Column arrays for the one-statement bulk insert (``unnest``), as array literals; a
    column that is NULL in every job is one NULL (``unnest`` pads it with NULLs)."""
    if len(jobs) > CHUNK:
        raise ValueError(f"at most {CHUNK} jobs per bulk insert, got {len(jobs)}")
    column: dict[str, tuple[Any, ...]] = dict.fromkeys(NewJob._fields, ())
    column.update(zip(NewJob._fields, zip(*jobs, strict=True), strict=False))  # none: no jobs
    return {
        "types": repeated_text_array(column["type"]),
        "queues": repeated_text_array(column["queue"]),
        "payloads": text_array(column["payload_json"]),
        "priorities": number_array(column["priority"]),
        "max_attempts": number_array(column["max_attempts"]),
        "run_afters": _or_null(times_array, column["run_after"]),
        "unique_keys": _or_null(text_array, column["unique_key"]),
        "unique_scopes": _or_null(repeated_text_array, column["unique_scope"]),
        "metas": _or_null(text_array, column["meta_json"]),
        "concurrency_keys": _or_null(text_array, column["concurrency_key"]),
        "unregistereds": bool_array(column["unregistered"]),
        "now": store._now(),
    }  # fmt: skip


def times_array(times: Sequence[datetime | None]) -> str:
    """A Postgres array literal of aware times (ISO 8601 texts)."""
    return text_array([t.isoformat() if t else None for t in times])


def repeated_text_array(texts: Sequence[str | None]) -> str:
    """``text_array`` of texts that are mostly one value (a batch's job type or queue):
    each distinct one quoted once."""
    distinct = set(texts)
    if len(distinct) > 8:
        return text_array(texts)
    quoted = {t: _quoted(t) for t in distinct}
    return "{" + ",".join([quoted[t] for t in texts]) + "}"


def _quoted(text: str | None) -> str:
    """One element of ``text_array``."""
    return "NULL" if text is None else '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def text_array(texts: Sequence[str | None]) -> str:
    """A Postgres array literal of texts: each quoted, backslashes and quotes escaped (what
    psycopg's list dumper does with a regular expression per element, at ~0.5 µs each)."""
    return (
        "{"
        + ",".join(
            "NULL" if t is None else '"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"'
            for t in texts
        )
        + "}"
    )


def parse_note(payload: str) -> tuple[str, float]:
    """A notification's queue and the seconds until its job comes due: ``"<queue>"`` (due
    now; what every version of tickq sends) or ``"<queue>\\x1f<milliseconds>"`` (see
    ``wake`` in postgres.sql). Anything else is a queue name, due now."""
    queue, sep, millis = payload.rpartition(WAKE_SEPARATOR)
    if sep and millis.isascii() and millis.isdigit():
        return queue, int(millis) / 1000
    return payload, 0.0
