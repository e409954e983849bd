"""Load the named SQL queries of a backend from ``sql/<dialect>.sql``."""

from __future__ import annotations

import os

from ..job import JOB_FIELDS, TRANSITIONS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from re import Match

SQL_DIR = os.path.join(os.path.dirname(__file__), "sql")

JOB_COLUMNS = JOB_FIELDS
"""The columns every query returning jobs selects, in ``Job``'s order."""
CLAIMED_COLUMNS = (
    "id", "type", "queue", "payload", "priority", "attempts", "max_attempts", "run_after",
    "last_error", "unique_key", "created_at", "attempted_at", "lease_expires_at", "meta",
    "snoozes", "snoozed_since",
)  # fmt: skip
"""What a claim returns: the rest of a just-claimed job is known (running, leased to the
claimer, updated when attempted, not finished), so it is not sent back."""
JSON_COLUMNS = ("payload", "meta", "result")

DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
                    600, 1800, 3600)  # fmt: skip
"""Upper bounds (seconds) of the job duration histogram; ``+Inf`` follows the last."""

OUT_OF_ATTEMPTS = "attempts >= max_attempts"
"""``job.out_of_attempts`` in SQL, over a ``tickq_jobs`` row."""

CANCEL_REQUESTED = "cancel_requested_at IS NOT NULL"
"""A running job asked to stop (``q.cancel``): it ends cancelled, never retried."""

ASKED_TO_STOP = f"({CANCEL_REQUESTED} AND {{@next_status}} <> 'done')"
"""The one decision ``finish`` leaves to SQL, over a ``tickq_jobs`` row and its decision
(``next_status``, a fragment of each dialect): a job asked to stop (``q.cancel``) while it
ran ends cancelled, its attempt counted, whatever the run came to; a success still
succeeds. (The worker may not have heard of the request yet: only the row knows.)"""

STOP_ERROR = (
    "(CASE WHEN {@next_status} = 'cancelled' THEN {@error_text} "
    "ELSE 'Cancel: cancel requested while attempt ' || attempts || ' was running; it then "
    "stopped with ' || COALESCE({@error_text}, 'no error') END)"
)
"""The error of a run that ``ASKED_TO_STOP`` ends cancelled: as raised when it raised
``Cancel``, else saying first that it was asked to stop."""

EXPIRED_ERROR = (
    "(CASE WHEN cancel_requested_at IS NULL THEN 'LeaseExpired: attempt ' || attempts || "
    "' was claimed by ' || lease_owner || ' which stopped renewing its lease (crashed, "
    "killed or cut off) before finishing' ELSE 'Cancel: cancel requested while attempt ' "
    "|| attempts || ' was running on ' || lease_owner || ', which stopped renewing its "
    "lease (crashed, killed or cut off) before the job stopped' END)"
)
"""The error of an attempt whose lease ran out (``rescue_expired``)."""

REFUND_ERROR = (
    "('Refunded: attempt ' || attempts || ' was claimed by ' || lease_owner || ' which "
    "stopped renewing its lease (crashed, killed or cut off) before confirming the job "
    "started; the attempt is not counted and the job runs again (once)')"
)
"""The error of a refunded run's history row (``refund_expired``)."""

HOLDERS_BACK = (
    "(CAST(:now AS timestamptz) IS NOT NULL OR now() >= pg_postmaster_start_time() "
    "+ make_interval(secs => :grace))"
)
"""PostgreSQL: no lease counts as run out in the first ``:grace`` seconds after the server
started (its holders could not renew while it was down); with an injected clock, always."""

WAKE_HORIZON = 600
"""PostgreSQL: seconds ahead for which putting a job in line notifies listening workers of
its due time (``wake`` in postgres.sql); a worker learns of later ones at its next look,
which is at most its poll interval away."""
WAKE_SEPARATOR = "\x1f"
"""Between the queue and the milliseconds in a notification of a job due later."""

_NAMED_PARAM = r"(?<![:\w]):(\w+)"


def load_queries(
    dialect: str, paramstyle: str, library: dict[str, str] | None = None
) -> dict[str, str]:
    """Return {name: sql}: ``sql/common.sql``, ``sql/<dialect>.sql`` and, for a backend's
    own queries, the workflows' ``sql/workflows_<dialect>.sql`` and retention's
    ``sql/retention_<dialect>.sql``. ``paramstyle``
    is "named" (:x) or "pyformat" (%(x)s). ``{@name}`` includes the section ``name`` of
    these queries, or of ``library`` when given (a store's own, for its browse queries).

    The text is built once per process (``_LOADED``); each call returns a new dict, which
    the caller may add to (a store adds its compiled and browse queries)."""
    if library is not None:
        return include_fragments(_merged(dialect, paramstyle), library)
    key = (dialect, paramstyle)
    loaded = _LOADED.get(key)
    if loaded is None:
        queries = _merged(dialect, paramstyle)
        loaded = _LOADED[key] = include_fragments(queries, queries)
    return dict(loaded)


_LOADED: dict[tuple[str, str], dict[str, str]] = {}
"""``load_queries`` of (dialect, paramstyle), fragments included: every store of the process
shares the text (~130 statements read and formatted once, not per ``Queue``)."""


def _merged(dialect: str, paramstyle: str) -> dict[str, str]:
    queries = _sections("common", paramstyle)
    own = (
        (f"workflows_{dialect}", f"retention_{dialect}")
        if dialect in ("sqlite", "postgres")
        else ()
    )
    for file in (dialect, *own):
        for name, sql in _sections(file, paramstyle).items():
            if name in queries:
                raise RuntimeError(f"query {name!r} is in {file}.sql and an earlier file")
            queries[name] = sql
    return queries


def include_fragments(queries: dict[str, str], library: dict[str, str]) -> dict[str, str]:
    """Replace each ``{@name}`` in ``queries`` with the section ``name`` of ``library``: one
    copy of SQL that several statements end with (e.g. ``retire_doomed``)."""
    import re

    def fragment(match: re.Match[str]) -> str:
        return library[match.group(1)]

    included = {}
    for name, sql in queries.items():
        while "{@" in sql:  # a fragment may include another (finish_update, decisions)
            sql = re.sub(r"\{@(\w+)\}", fragment, sql)
        included[name] = sql
    return included


def _sections(file: str, paramstyle: str) -> dict[str, str]:
    with open(os.path.join(SQL_DIR, f"{file}.sql"), encoding="utf-8") as f:
        text = f.read()
    queries: dict[str, str] = {}
    for section in text.split("-- name: ")[1:]:
        name, _, body = section.partition("\n")
        lines = [ln for ln in body.splitlines() if not ln.lstrip().startswith("--")]
        queries[name.strip()] = format_query("\n".join(lines).strip(), paramstyle)
    return queries


def format_query(sql: str, paramstyle: str) -> str:
    """``sql`` with tickq's placeholders (``{job_columns}``, ``{of_job:…}``…) written out
    and, for "pyformat", its ``:name`` parameters as ``%(name)s``."""
    if "{" in sql:
        for placeholder, text in _expansions():
            sql = sql.replace(placeholder, text)
        if "{of_job:" in sql:
            import re

            sql = re.sub(r"\{of_job:(\w+):(\w+)\}", _of_job, sql)
    if paramstyle == "pyformat":
        import re

        sql = re.sub(_NAMED_PARAM, r"%(\1)s", sql.replace("%", "%%"))
    return sql


def _expansions() -> list[tuple[str, str]]:
    """The placeholders ``format_query`` writes out, with their text: built once per
    process, on first use (the column lists and the histogram's CASE took longer to build
    than the ~130 statements that use them took to read)."""
    if not _EXPANSIONS:
        _EXPANSIONS.extend([
            ("{job_columns_j}", column_list(JOB_COLUMNS, "j.")),
            ("{job_columns}", column_list(JOB_COLUMNS)),
            ("{claimed_columns}", column_list(CLAIMED_COLUMNS)),
            ("{duration_bucket}", duration_bucket_sql()),
            ("{rescued_status}", rescued_status_sql()),
            ("{out_of_attempts}", OUT_OF_ATTEMPTS),
            ("{asked_to_stop}", ASKED_TO_STOP),
            ("{stop_error}", STOP_ERROR),
            ("{expired_error}", EXPIRED_ERROR),
            ("{refund_error}", REFUND_ERROR),
            ("{holders_back}", HOLDERS_BACK),
            ("{wake_horizon}", str(WAKE_HORIZON)),
        ])  # fmt: skip
    return _EXPANSIONS


_EXPANSIONS: list[tuple[str, str]] = []


def _of_job(match: Match[str]) -> str:
    """``{of_job:errors:text}``: this row's element of the array ``:errors`` (``text[]``),
    lined up with ``:ids``, which the store sends in ascending order (PostgreSQL). A
    subscript found by ``width_bucket``'s binary search of ``:ids``: not a join with the
    arrays unnested (a prepared plan can't know how many there are, and joined it
    unnested them again for each job it found, or scanned the table), nor
    ``array_position``, whose scan, a dozen times a row, made a batch's cost grow with
    the square of its size."""
    return _element(*match.groups())


def _element(name: str, kind: str) -> str:
    return f"(CAST(:{name} AS {kind}[]))[width_bucket(tickq_jobs.id, CAST(:ids AS bigint[]))]"


def column_list(columns: tuple[str, ...], prefix: str = "") -> str:
    """``id, ..., CAST(payload AS text) AS payload``: JSON comes back as text, decoded by
    tickq (Postgres's jsonb loader in psycopg costs more per row than json.loads)."""
    return ", ".join(
        f"CAST({prefix}{c} AS text) AS {c}" if c in JSON_COLUMNS else f"{prefix}{c}"
        for c in columns
    )


def bucket_label(bound: float) -> str:
    """The ``le`` label of a bucket bound, as Prometheus writes it (``0.5``, ``60.0``)."""
    return repr(float(bound))


def duration_bucket_sql() -> str:
    """A CASE expression putting the column ``seconds`` into its histogram bucket's label."""
    whens = " ".join(f"WHEN seconds <= {b!r} THEN '{bucket_label(b)}'" for b in DURATION_BUCKETS)
    return (
        f"(CASE WHEN seconds IS NULL THEN '{bucket_label(DURATION_BUCKETS[0])}' {whens} "
        "ELSE '+Inf' END)"
    )


def rescued_status_sql() -> str:
    """The status a rescued job moves to, as ``job.STATE_MACHINE`` says (cancelled when
    it was asked to stop): a CASE over the row, so both backends rescue every expired job
    in one statement (deciding in Python would cost a round trip to read the rows first)."""
    rescued = TRANSITIONS["rescued"]
    return (
        f"(CASE WHEN {CANCEL_REQUESTED} THEN 'cancelled' WHEN {OUT_OF_ATTEMPTS} "
        f"THEN '{rescued.exhausted}' ELSE '{rescued.target}' END)"
    )


def migrations(dialect: str) -> list[tuple[int, str, str]]:
    """[(version, name, sql)] shipped for ``dialect``, in order."""
    folder = os.path.join(SQL_DIR, "migrations", dialect)
    found = []
    for name in sorted(n for n in os.listdir(folder) if n.endswith(".sql")):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            found.append((int(name.split("_", 1)[0]), name.removesuffix(".sql"), f.read()))
    return found
