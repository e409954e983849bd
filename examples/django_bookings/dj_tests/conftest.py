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
