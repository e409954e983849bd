from django.db import models


class User(models.Model):
    email = models.EmailField(unique=True)


class Booking(models.Model):
    email = models.EmailField()
    starts_at = models.DateTimeField()
    reminder_sent_at = models.DateTimeField(null=True)


class SentEmail(models.Model):
    """What went out: a retried job checks here first, so nothing goes twice."""

    kind = models.CharField(max_length=40)
    key = models.CharField(max_length=200, unique=True)
