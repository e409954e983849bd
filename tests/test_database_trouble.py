"""Database trouble that is not a network outage — a read-only database (as after a
failover to a replica), too many connections, a full disk — is a ``DatabaseUnavailable``
that says which, in words, on every surface: enqueue raises it (never a raw driver error),
the tick endpoint answers 503 with ``Retry-After`` through a real socket (no host, port or
database name), ``tickq tick`` prints one line and exits 1 (no traceback), and a worker
logs WARNING lines naming it and carries on. Each fault is real: a database set read-only,
a hot standby (promoted at the end), a role with CONNECTION LIMIT 1, tickq's tables or
Postgres's WAL or a SQLite file on a small tmpfs, a read-only bind mount."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

import pgcluster
from conftest import PG_URL, require_postgres, run_tickq
from test_web import AUTH, SECRET, TICK, serving
from tickq import DatabaseUnavailable, Queue, SchemaMissing

APP = "apps.counter:q"


def admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(sql)


def database_url(name: str, user: str | None = None) -> str:
    parts = urlsplit(PG_URL)
    netloc = parts.netloc if user is None else f"{user}@{parts.netloc.rpartition('@')[2]}"
    return parts._replace(netloc=netloc, path=f"/{name}").geturl()


@pytest.fixture
def database() -> Iterator[str]:
    """A Postgres database of this test's own (settings like read-only are per database)."""
    require_postgres()
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin(f"CREATE DATABASE {name}")
    try:
        yield name
    finally:
        admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def say_trouble_over_http(q: Queue, words: str, *hidden: str) -> None:
    """The tick endpoint, through a real socket, answers 503 + Retry-After naming
    ``words`` and none of ``hidden``."""
    with serving(q.asgi_app(secret=SECRET)) as base:
        r = httpx.post(base + TICK, headers=AUTH, timeout=30)
    assert r.status_code == 503, r.text
    assert r.headers["retry-after"] == "30"
    assert words in r.text and "unreachable" not in r.text, r.text
    for word in hidden:
        assert word not in r.text, (word, r.text)
    assert r.json()["error"].startswith("the tick ran nothing (DatabaseUnavailable)")


def say_trouble_in_one_line(url: str, words: str) -> None:
    """``tickq tick`` prints one line naming ``words`` and exits 1."""
    result = run_tickq("tick", APP, TICKQ_DATABASE_URL=url)
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tickq: error: "), result.stderr
    assert words in lines[0] and "Traceback" not in result.stderr


def test_a_read_only_database_says_so_everywhere_and_tickq_recovers_when_it_is_writable(
    database: str,
) -> None:
    url = database_url(database)
    writer = Queue(url, strict=False)
    writer.migrate()
    writer.enqueue("record", {"n": 1})
    writer.close()
    admin(f"ALTER DATABASE {database} SET default_transaction_read_only = on")
    q = Queue(url, strict=False)
    with pytest.raises(DatabaseUnavailable) as caught:
        q.enqueue("record", {"n": 2})
    assert "is read-only (a replica?" in str(caught.value)
    assert "point the database URL at the primary" in str(caught.value)
    assert caught.value.reason == "read-only"
    say_trouble_over_http(q, "the database is read-only (a replica?", database, "5432")
    say_trouble_in_one_line(url, "is read-only (a replica?")
    admin(f"ALTER DATABASE {database} SET default_transaction_read_only = off")
    assert q.enqueue("record", {"n": 3}) > 0  # a new connection: writable again
    assert q.stats()["by_status"]["pending"] == 2
    q.close()


@pytest.fixture
def limited_role(database: str) -> Iterator[str]:
    """A role that may hold one connection, owning the test's database."""
    role = f"r_{uuid.uuid4().hex[:10]}"
    admin(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 1")
    try:
        admin(f"ALTER DATABASE {database} OWNER TO {role}")
        yield role
    finally:
        admin(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        admin(f"DROP ROLE IF EXISTS {role}")


def test_too_many_connections_is_not_called_unreachable(database: str, limited_role: str) -> None:
    import psycopg

    url = database_url(database, user=limited_role)
    setup = Queue(url, strict=False)
    setup.migrate()
    setup.close()
    with psycopg.connect(url):  # the role's one connection, taken
        q = Queue(url, strict=False)
        with pytest.raises(DatabaseUnavailable) as caught:
            q.enqueue("record", {"n": 1})
        assert "refused a connection: too many connections" in str(caught.value)
        assert "raise max_connections" in str(caught.value)
        assert "unreachable" not in str(caught.value)
        assert caught.value.reason == "too many connections"
        say_trouble_over_http(q, "too many connections", database, limited_role, "5432")
        say_trouble_in_one_line(url, "too many connections")
    # The connection is free again once its server process has ended (it ends just after
    # the client hangs up, so the role's slot may take a moment to come back).
    deadline = time.monotonic() + 10
    while True:
        try:
            assert q.enqueue("record", {"n": 2}) > 0
            break
        except DatabaseUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    q.close()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MB tmpfs of the test's own, unmounted at the end."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        if os.environ.get("CI"):
            pytest.fail("a small tmpfs needs root and mount (CI=true: a failure, not a skip)")
        pytest.skip("a small tmpfs needs root and mount")
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> Path:
    """A file taking all but ~100 KB of ``disk``'s free space; delete it to free space."""
    filler = disk / "filler"
    stat = os.statvfs(disk)
    filler.write_bytes(b"\0" * max(0, stat.f_bavail * stat.f_frsize - 100_000))
    return filler


def take_the_rest(disk: Path) -> Path:
    """A file taking every byte still free on ``disk``."""
    rest = disk / "rest"
    with open(rest, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass
    return rest


def test_a_full_disk_on_sqlite_says_disk_full_everywhere_and_tickq_recovers(
    small_disk: Path,
) -> None:
    import sqlite3

    url = f"sqlite:///{small_disk / 'jobs.db'}"
    q = Queue(url, strict=False)
    q.migrate()
    q.enqueue("record", {"n": 0})  # due: a tick has something to claim
    q.close()
    # An empty log: tickq reuses a log's own space when it can (it keeps working on a full
    # disk then), so every write below must find new room, and there is none.
    with closing(sqlite3.connect(small_disk / "jobs.db")) as conn:
        assert conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
    filler, rest = fill(small_disk), take_the_rest(small_disk)
    q = Queue(url, strict=False)
    with pytest.raises(DatabaseUnavailable) as caught:
        q.enqueue("record", {"n": 1, "pad": "x" * 2000})
    assert "is out of space: disk full" in str(caught.value)
    assert caught.value.reason == "disk full"
    with pytest.raises(DatabaseUnavailable, match="disk full"):
        q.enqueue("record", {"n": -1, "pad": "x" * 2000})
    say_trouble_over_http(q, "the database is out of space (disk full)", str(small_disk))
    say_trouble_in_one_line(url, "disk full")
    filler.unlink()
    rest.unlink()
    assert q.enqueue("record", {"n": -2}) > 0
    assert q.tick()["jobs"]["claimed"] > 0
    q.close()


@pytest.fixture
def read_only_view(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A folder and a read-only bind mount of it (as a read-only volume would be)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        if os.environ.get("CI"):
            pytest.fail("a read-only bind mount needs root (CI=true: a failure, not a skip)")
        pytest.skip("a read-only bind mount needs root and mount")
    folder, view = tmp_path / "rw", tmp_path / "ro"
    folder.mkdir()
    view.mkdir()
    subprocess.run(["mount", "--bind", str(folder), str(view)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(view)], check=True)
        yield folder, view
    finally:
        subprocess.run(["umount", "-l", str(view)], check=False)


def test_a_read_only_sqlite_file_is_a_tickq_error_not_the_drivers(
    read_only_view: tuple[Path, Path],
) -> None:
    folder, view = read_only_view
    writer = Queue(f"sqlite:///{folder / 'jobs.db'}", strict=False)
    writer.migrate()
    writer.enqueue("record", {"n": 1})  # open: its -wal and -shm files exist
    q = Queue(f"sqlite:///{view / 'jobs.db'}", strict=False)
    with pytest.raises(DatabaseUnavailable) as caught:
        q.enqueue("record", {"n": 2})
    assert "is read-only for this process" in str(caught.value)
    assert caught.value.reason == "read-only", caught.value
    assert q.stats()["by_status"]["pending"] == 1  # reading still works
    q.close()
    writer.close()  # no -shm left to share: opening from the read-only view fails itself
    alone = Queue(f"sqlite:///{view / 'jobs.db'}", strict=False)
    with pytest.raises(DatabaseUnavailable) as caught:
        alone.enqueue("record", {"n": 3})
    assert caught.value.reason == "read-only" and "a read-only mount?" in str(caught.value)
    alone.close()


@contextmanager
def tmpfs(path: Path, size: str, owner: str | None = None) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        if owner:
            shutil.chown(path, owner, owner)
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@contextmanager
def cluster(*initdb: str) -> Iterator[str]:
    """A Postgres cluster of the test's own (``initdb`` options added); yields its URL."""
    problem = pgcluster._missing()
    if problem or shutil.which("mount") is None:
        if os.environ.get("CI"):
            pytest.fail(f"{problem or 'no mount'} (CI=true: a test that cannot run is a failure)")
        pytest.skip(problem or "mount is missing")
    name, port = f"tickq_{uuid.uuid4().hex[:10]}", pgcluster._free_port()
    try:
        subprocess.run(
            ["pg_createcluster", pgcluster.VERSION, name, "-p", str(port), "--start",
             "--", "--auth=trust", *initdb],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        drop(name)


def drop(name: str) -> None:
    """Stop at once and drop; a server out of WAL space may be restarting meanwhile."""
    for _ in range(40):
        stop = ["pg_ctlcluster", pgcluster.VERSION, name, "stop", "-m", "immediate"]
        subprocess.run(stop, capture_output=True, timeout=120)
        dropped = subprocess.run(["pg_dropcluster", pgcluster.VERSION, name],
                                 capture_output=True, text=True, timeout=120)  # fmt: skip
        if dropped.returncode == 0:
            return
        time.sleep(0.25)


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A folder the postgres user can reach (pytest's tmp_path is private to root)."""
    path = Path(f"/tmp/tickq-{uuid.uuid4().hex[:10]}")
    path.mkdir(mode=0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def fill_postgres(q: Queue) -> DatabaseUnavailable:
    """Enqueue jobs of ~8 KB that don't compress until the database says it can't."""
    with pytest.raises(DatabaseUnavailable) as caught:
        for n in range(20_000):
            q.enqueue("record", {"n": n, "pad": os.urandom(4000).hex()})
    return caught.value


def test_a_full_disk_on_postgres_says_disk_full_everywhere(open_dir: Path) -> None:
    with cluster() as url, tmpfs(open_dir / "small", "3m", owner="postgres") as disk:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:  # tickq's tables on a 3 MB disk
            conn.execute(f"CREATE TABLESPACE small LOCATION '{disk}'")
            conn.execute("ALTER DATABASE postgres SET default_tablespace = small")
        q = Queue(url, strict=False)
        q.migrate()
        full = fill_postgres(q)
        assert "is out of disk space: disk full (could not extend file" in str(full)
        assert "free space on the database server" in str(full)
        assert full.reason == "disk full", full
        port = urlsplit(url).port
        say_trouble_over_http(q, "the database is out of space (disk full)", f":{port}")
        say_trouble_in_one_line(url, "disk full")
        q.close()


def test_a_full_wal_disk_on_postgres_says_disk_full_not_unreachable(open_dir: Path) -> None:
    wal = open_dir / "wal"
    with tmpfs(wal, "40m", owner="postgres"), cluster(f"--waldir={wal / 'pg_wal'}") as url:
        q = Queue(url, strict=False)
        q.migrate()
        full = fill_postgres(q)  # the server then stops: nothing can be logged
        assert "disk full (could not write to file" in str(full), full
        assert "No space left on device" in str(full)
        assert full.reason == "disk full", full
        q.close()


def test_a_worker_on_a_read_only_database_warns_without_tracebacks_and_resumes(
    database: str,
) -> None:
    from workerproc import WorkerProcess, eventually

    url = database_url(database)
    q = Queue(url, strict=False)
    q.migrate()
    job_id = q.enqueue("work", {})
    admin(f"ALTER DATABASE {database} SET default_transaction_read_only = on")
    with WorkerProcess(TICKQ_DATABASE_URL=url) as worker:
        line = worker.wait_for_line("trouble (try 1)")
        assert "is read-only (a replica?" in line and "WARNING" in line.upper(), line
        time.sleep(1.0)  # several more failed tries
        admin(f"ALTER DATABASE {database} SET default_transaction_read_only = off")
        eventually(lambda: q.get_job(job_id).status == "done", what="the job to run")  # type: ignore[union-attr]
        assert "Traceback" not in worker.output and "unexpected" not in worker.output
        # One WARNING for the episode (issue 23), not one per failed try.
        assert worker.output.count("database trouble") == 1, worker.output
    q.close()


@contextmanager
def primary_and_standby() -> Iterator[tuple[str, str, str]]:
    """A primary and a hot standby streaming from it (clusters of the test's own); yields
    their URLs and the standby's cluster name."""
    with cluster() as primary:
        name, port = f"tickq_{uuid.uuid4().hex[:10]}", pgcluster._free_port()
        version = pgcluster.VERSION
        try:
            create = ["pg_createcluster", version, name, "-p", str(port), "--", "--auth=trust"]
            subprocess.run(create, check=True, capture_output=True, timeout=120)
            data = f"/var/lib/postgresql/{version}/{name}"
            subprocess.run(["find", data, "-mindepth", "1", "-delete"], check=True)
            subprocess.run(
                ["runuser", "-u", "postgres", "--", "pg_basebackup", "-h", "127.0.0.1", "-p",
                 str(urlsplit(primary).port), "-U", "postgres", "-D", data, "-R", "-X", "stream"],
                check=True, capture_output=True, timeout=120,
            )  # fmt: skip
            subprocess.run(["pg_ctlcluster", version, name, "start"], check=True,
                           capture_output=True, timeout=120)  # fmt: skip
            yield primary, f"postgresql://postgres@127.0.0.1:{port}/postgres", name
        finally:
            drop(name)


def test_a_replica_is_read_only_a_replica_and_its_promotion_needs_no_restart() -> None:
    with primary_and_standby() as (primary_url, replica_url, replica):
        primary = Queue(primary_url, strict=False)
        primary.migrate()
        job_id = primary.enqueue("record", {"n": 1})
        primary.close()
        q = Queue(replica_url, strict=False)  # as an app still pointed at the old primary
        from workerproc import eventually

        eventually(lambda: _replayed(q, job_id), what="the job to reach the replica")
        with pytest.raises(DatabaseUnavailable) as caught:
            q.enqueue("record", {"n": 2})
        assert "is read-only (a replica?" in str(caught.value)
        assert caught.value.reason == "read-only"
        say_trouble_over_http(q, "the database is read-only (a replica?")
        say_trouble_in_one_line(replica_url, "is read-only (a replica?")
        subprocess.run(["pg_ctlcluster", pgcluster.VERSION, replica, "promote"], check=True,
                       capture_output=True, timeout=120)  # fmt: skip
        assert eventually(lambda: _enqueued(q), what="an enqueue on the promoted replica")
        assert q.tick()["jobs"]["claimed"] == 2
        q.close()


def _replayed(q: Queue, job_id: int) -> bool:
    try:
        return q.get_job(job_id) is not None
    except SchemaMissing:  # the tables themselves are not replayed yet
        return False


def _enqueued(q: Queue) -> int | None:
    try:
        return q.enqueue("record", {"n": 3})
    except DatabaseUnavailable:
        return None
