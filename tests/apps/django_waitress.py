"""A Django project in one file serving tickq's endpoints, a webhook and the dashboard
under waitress, over a real socket.

``python tests/apps/django_waitress.py`` prints its port, then serves until killed. Set by
the environment: ``TICKQ_DATABASE_URL``, ``CRON_SECRET`` and ``TICKQ_METRICS_TOKEN``; the
dashboard has no password, so it answers 503.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import django
from django.conf import settings

from tickq import Queue
from tickq.webhooks import GitHub

q = Queue()


@q.webhook("/hooks/github", verify=GitHub("django-waitress-webhook-secret"))
def on_push(event: dict[str, Any]) -> None:
    pass


settings.configure(
    ROOT_URLCONF=__name__,
    ALLOWED_HOSTS=["127.0.0.1"],
    SECRET_KEY="django-test-" + "x" * 40,
    MIDDLEWARE=["django.middleware.common.CommonMiddleware"],
    INSTALLED_APPS=[],
)
django.setup()
urlpatterns = q.django_urls(dashboard=True, metrics=True)


if __name__ == "__main__":
    import sys

    import waitress
    from django.core.wsgi import get_wsgi_application

    sys.modules[__name__] = sys.modules["__main__"]
    os.environ.pop("TICKQ_DASHBOARD_PASSWORD", None)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    print(sock.getsockname()[1], flush=True)
    waitress.serve(get_wsgi_application(), sockets=[sock], threads=2, _quiet=True)
