"""Plain tickq (no Tasks API) in a Django project: a job that uses the ORM."""

from django.contrib.auth.models import Group  # needs Django set up: DJANGO_SETTINGS_MODULE

from tickq import Queue
from tickq.contrib.django import queue

q = Queue(queue().url)


@q.job()
def count_groups() -> int:
    return Group.objects.count()
