"""The guide's two jobs as Django tasks run by tickq."""

from datetime import timedelta

from django.db import transaction
from django.utils import timezone

try:
    from django.tasks import task  # Django 6+
except ImportError:  # Django 5.2 with the django-tasks backport
    from django_tasks import task

from tickq.contrib.django import schedule

from .models import Booking, SentEmail


@task(queue_name="emails", max_attempts=4, backoff=(60, 300, 1800))
def send_welcome_email(email: str) -> dict:
    """Triggered on signup; safe to run twice (the SentEmail row is the record)."""
    _, created = SentEmail.objects.get_or_create(kind="welcome", key=f"welcome:{email}")
    # ... call the email provider here when created ...
    return {"to": email, "sent": created}


@schedule("*/15 * * * *")
@task()
def send_booking_reminders() -> int:
    """Every 15 minutes: remind bookings starting in the next 24 hours, once each."""
    now, sent = timezone.now(), 0
    due = Booking.objects.filter(
        reminder_sent_at__isnull=True, starts_at__gt=now, starts_at__lte=now + timedelta(hours=24)
    )
    for booking in due[:100]:
        with transaction.atomic():
            _, created = SentEmail.objects.get_or_create(
                kind="reminder", key=f"reminder:{booking.pk}"
            )
            Booking.objects.filter(pk=booking.pk).update(reminder_sent_at=now)
        sent += created
    return sent
