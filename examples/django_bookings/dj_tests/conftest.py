from collections.abc import Iterator

import pytest
from django.db import connection


@pytest.fixture(autouse=True)
def _empty_tickq_tables() -> Iterator[None]:
    """Django's flush between tests knows its models only; tickq's rows go here."""
    yield
    with connection.cursor() as cursor:
        for table in ("tickq_attempts", "tickq_jobs", "tickq_schedules", "tickq_ticks"):
            cursor.execute(f"DELETE FROM {table}")


@pytest.fixture(scope="session", autouse=True)
def _tickq_connections_closed(django_db_setup: None, django_db_blocker) -> Iterator[None]:
    """tickq keeps a connection per thread that used it (tests' sync_to_async threads too);
    close them before pytest-django drops the test database."""
    yield
    from tickq.contrib.django import queue

    with django_db_blocker.unblock():
        queue().close()
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
