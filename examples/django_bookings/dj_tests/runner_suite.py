"""Run by ``manage.py test dj_tests.runner_suite`` (Django's own test runner, not pytest):
tests/test_django.py checks that it exits 0 and drops its test database, on Postgres too,
with the tickq backend configured (no tickq connection may be left open on it)."""

import io
import os

from asgiref.sync import async_to_sync
from bookings.tasks import send_welcome_email
from django.core.management import call_command
from django.test import Client, TransactionTestCase

from dj_tests import tasks
from tickq.contrib.django.compat import TaskResultStatus

SECRET = "s3cret-token-for-the-tick-0123456789"


class TickqUnderDjangosRunner(TransactionTestCase):
    def test_enqueue_run_read_back(self) -> None:
        result = send_welcome_email.enqueue("runner@example.com")
        call_command("tickq_worker", "--burst", stdout=io.StringIO())
        result.refresh()
        self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)

    def test_a_failure_reads_back(self) -> None:
        result = tasks.always_fails.enqueue(3)
        call_command("tickq_tick", stdout=io.StringIO())
        call_command("tickq_tick", stdout=io.StringIO())
        self.assertEqual(tasks.always_fails.get_result(result.id).status, "FAILED")

    def test_the_tick_and_health_urls(self) -> None:
        os.environ["CRON_SECRET"] = SECRET
        send_welcome_email.enqueue("url@example.com")
        answer = Client().post("/api/cron/tick", headers={"authorization": f"Bearer {SECRET}"})
        self.assertEqual(answer.status_code, 200)
        self.assertEqual(Client().get("/api/cron/health").status_code, 200)

    def test_the_async_api(self) -> None:
        async def scenario() -> object:
            result = await tasks.adds_later.aenqueue(1, 2)
            return await tasks.adds_later.aget_result(result.id)

        self.assertEqual(async_to_sync(scenario)().status, TaskResultStatus.READY)
