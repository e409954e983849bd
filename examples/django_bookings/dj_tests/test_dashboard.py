"""The dashboard under api/cron/tickq/: active staff users of Django's own login only."""

from types import SimpleNamespace

import pytest
from django.test import RequestFactory
from django.urls import resolve

from dj_tests import tasks

pytestmark = pytest.mark.django_db(transaction=True)


def user(*, staff: bool, active: bool = True) -> SimpleNamespace:
    return SimpleNamespace(is_staff=staff, is_active=active, is_authenticated=True)


def get(path: str, who: object | None) -> tuple[int, str]:
    request = RequestFactory().get(path)
    if who is not None:
        request.user = who
    match = resolve(path)
    response = match.func(request, **match.kwargs)
    return response.status_code, response.content.decode()


def test_staff_see_the_dashboard_and_a_failed_job() -> None:
    job_id = int(tasks.always_fails.enqueue(1).id)
    status, body = get(f"/api/cron/tickq/jobs/{job_id}", user(staff=True))
    assert status == 200, body
    assert "always_fails" in body  # the job type, shown to staff only
    status, body = get("/api/cron/tickq/", user(staff=True))
    assert status == 200 and "tickq" in body


@pytest.mark.parametrize("who", [None, user(staff=False), user(staff=True, active=False)], ids=str)
def test_everyone_else_gets_no_data(who: object | None) -> None:
    job_id = int(tasks.always_fails.enqueue(1).id)
    status, body = get(f"/api/cron/tickq/jobs/{job_id}", who)
    assert status in (302, 401, 403), (status, body)
    assert "always_fails" not in body
