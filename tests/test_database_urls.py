"""Database URLs: which one a Queue uses, and that a password never shows (repr, messages,
logs, the CLI); mistakes reported as what they are, in one line."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from conftest import PG_URL, require_postgres, run_tickq
from tickq import ConfigurationError, DatabaseUnavailable, Queue
from tickq.redact import redact_url

PASSWORD = "hunter2-pw"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://app:hunter2-pw@db:5432/app", "postgresql://app:***@db:5432/app"),
        ("postgresql://app@db/app?password=hunter2-pw&sslmode=require",
         "postgresql://app@db/app?password=***&sslmode=require"),
        ("postgresql://db/app?user=a@b&sslpassword=hunter2-pw", "sslpassword=***"),
        ("postgresql://u:hunter2-pw?x@db/app", "postgresql://u:***@db/app"),
        ("postgresql://u:a@hunter2-pw@db/app", "postgresql://u:***@db/app"),
        ("sqlite:///app.db?timeout=5", "sqlite:///app.db?timeout=5"),
    ],
)  # fmt: skip
def test_redact_url_hides_passwords(url: str, shown: str) -> None:
    assert shown in redact_url(url) and "hunter2" not in redact_url(url)


def test_queue_repr_hides_the_password_in_the_user_part_and_the_query() -> None:
    """``?password=`` used to show in repr(Queue)."""
    q = Queue(f"postgresql://app:{PASSWORD}@db.example:5432/app?password={PASSWORD}")
    assert PASSWORD not in repr(q)
    assert "postgresql://app:***@db.example:5432/app?password=***" in repr(q)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (f"mysql://root:{PASSWORD}@localhost/app", "unsupported database URL scheme 'mysql'"),
        (f"MySQL+pymysql://root:{PASSWORD}@h/app", "scheme 'mysql+pymysql'"),
        (f"root:{PASSWORD}@localhost/app", "'root:***@localhost/app' has no valid scheme"),
        ("app.db", "did you mean 'sqlite:///app.db'?"),
        (PASSWORD.replace("-", ""), "database URL (9 characters) has no valid scheme"),
        (f"postgresql://u:{PASSWORD}%zz@127.0.0.1/d", "invalid percent-encoded token; write a"),
        (f"postgresql://u:{PASSWORD}@h/d?bogus=1", "invalid URI query parameter"),
        (f"sqlite://u:{PASSWORD}@h/app.db", "SQLite URL 'sqlite://u:***@h/app.db' has a host"),
        (f"sqlite:///app.db?timeout=abc&password={PASSWORD}", "?timeout= must be seconds"),
    ],
)
def test_bad_urls_are_reported_without_the_password(url: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Queue(url)
    text = str(caught.value)
    assert message in text and "hunter2" not in text and "\n" not in text


def test_an_empty_url_is_an_error_not_a_quiet_tickq_db(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for empty in ("", "   "):
        with pytest.raises(ConfigurationError, match="the database URL is empty"):
            Queue(empty)
    monkeypatch.setenv("TICKQ_DATABASE_URL", "")
    with pytest.raises(ConfigurationError, match=r"\$TICKQ_DATABASE_URL is set but empty"):
        Queue()
    with pytest.raises(ConfigurationError, match="must be a str"):
        Queue(tmp_path / "app.db")  # type: ignore[arg-type]
    assert not (tmp_path / "tickq.db").exists()


def test_queue_without_a_url_says_at_info_which_database_it_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TICKQ_DATABASE_URL", raising=False)
    with caplog.at_level(logging.INFO, logger="tickq"):
        assert Queue().url == "sqlite:///tickq.db"
        monkeypatch.setenv("TICKQ_DATABASE_URL", f"sqlite:///{tmp_path}/env.db?password={PASSWORD}")
        assert Queue().url.startswith(f"sqlite:///{tmp_path}/env.db")
        Queue(f"sqlite:///{tmp_path}/given.db")  # an explicit URL needs no word
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == (
        f"tickq uses sqlite:///tickq.db (./tickq.db in {os.getcwd()}): no URL given and "
        "$TICKQ_DATABASE_URL is not set"
    )
    assert (
        lines[1]
        == f"tickq uses the database in $TICKQ_DATABASE_URL: sqlite:///{tmp_path}/env.db?password=***"
    )
    assert len(lines) == 2


def test_a_database_that_does_not_exist_is_not_a_passing_outage() -> None:
    require_postgres()
    from urllib.parse import urlsplit

    missing = urlsplit(PG_URL)._replace(path="/tickq_no_such_db_xyz").geturl()
    with pytest.raises(ConfigurationError) as caught:
        Queue(missing).stats()
    assert not isinstance(caught.value, DatabaseUnavailable)
    assert (
        "has no database 'tickq_no_such_db_xyz': create it (createdb tickq_no_such_db_xyz"
        in str(caught.value)
    )


def test_a_missing_sqlite_folder_is_reported_as_such(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"the folder .*nowhere' does not exist"):
        Queue(f"sqlite:///{tmp_path}/nowhere/app.db").migrate()


def test_the_cli_reports_a_bad_percent_escape_in_one_line_without_the_password() -> None:
    """It used to print a 35-line traceback ending in the password."""
    url = f"postgresql://app:{PASSWORD}%zz@127.0.0.1:5432/app"
    for args in (("migrate", "--url", url), ("stats", "--url", url)):
        result = run_tickq(*args)
        assert result.returncode == 1, result
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
        assert result.stderr.startswith("tickq: error: invalid PostgreSQL URL")
        assert "hunter2" not in result.stderr + result.stdout
    result = run_tickq("migrate", TICKQ_DATABASE_URL=f"mysql://root:{PASSWORD}@h/app")
    assert result.stderr == (
        "tickq: error: unsupported database URL scheme 'mysql': expected sqlite:///path.db or "
        "postgresql://user@host:5432/dbname\n"
    )
