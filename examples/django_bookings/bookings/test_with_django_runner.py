"""Django's own test runner with the tickq backend: ``python manage.py test bookings``.

docs/testing.md shows this file; tests/test_docs_testing.py runs it.
"""

from django.db import IntegrityError, connection, transaction
from django.test import TestCase, TransactionTestCase

from tickq.contrib.django import queue
from tickq.testing import drain

from .models import SentEmail, User
from .tasks import send_welcome_email

TICKQ_TABLES = ("tickq_attempts", "tickq_jobs", "tickq_schedules", "tickq_ticks")


class WhatSignupEnqueues(TestCase):
    """Only what was enqueued: TestCase's transaction is rolled back, tickq's rows with it."""

    def test_a_failed_signup_leaves_no_task(self) -> None:
        User.objects.create(email="ada@example.com")
        with self.assertRaises(IntegrityError), transaction.atomic():
            send_welcome_email.enqueue("ada@example.com")
            User.objects.create(email="ada@example.com")  # a duplicate: both roll back
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM tickq_jobs")
            self.assertEqual(cursor.fetchone(), (0,))


class SignupRunsItsTask(TransactionTestCase):
    """Running tasks: committed for real, so the worker's connection (drain) sees them."""

    def tearDown(self) -> None:
        with connection.cursor() as cursor:  # Django's flush knows its own models only
            for table in TICKQ_TABLES:
                cursor.execute(f"DELETE FROM {table}")

    def test_the_welcome_email_is_sent_once(self) -> None:
        with transaction.atomic():
            User.objects.create(email="bo@example.com")
            result = send_welcome_email.enqueue("bo@example.com")
        self.assertEqual(drain(queue())["succeeded"], 1)
        result.refresh()
        self.assertEqual(result.return_value, {"to": "bo@example.com", "sent": True})
        self.assertEqual(SentEmail.objects.filter(key="welcome:bo@example.com").count(), 1)
