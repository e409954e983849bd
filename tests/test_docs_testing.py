"""docs/testing.md's Django example (``examples/django_bookings/bookings/
test_with_django_runner.py``) passes under Django's own test runner, ``manage.py test``, on
Django 5.2 with the backport and on Django 6.1; the page's other examples run in
tests/test_docs_examples.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT
from test_django import EXAMPLE, python_for

MODULE = "bookings.test_with_django_runner"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("django", ["5.2+backport", "6.1"])
def test_the_guides_django_example_passes_under_manage_py_test(django: str, tmp_path: Path) -> None:
    env = {**os.environ, "BOOKINGS_DATABASE_URL": f"sqlite:///{tmp_path / 'bookings.db'}",
           "PYTHONPATH": str(ROOT / "src"), "CRON_SECRET": ""}  # fmt: skip
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run([python_for(django), "manage.py", "test", MODULE, "-v", "2"],
                          cwd=EXAMPLE, env=env, capture_output=True, text=True,
                          timeout=240)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Ran 2 tests" in done.stderr and "\nOK" in done.stderr, done.stderr
    assert "test_the_welcome_email_is_sent_once" in done.stderr
    page = (ROOT / "docs" / "testing.md").read_text()
    assert f'--8<-- "{EXAMPLE.relative_to(ROOT)}/bookings/test_with_django_runner.py"' in page
