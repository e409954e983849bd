"""A Django project in one file serving tickq's dashboard over a real socket.

``python tests/apps/django_dashboard.py`` prints its port, then serves until killed. Set by
the environment: ``TICKQ_DATABASE_URL`` and ``TICKQ_DASHBOARD_PASSWORD``; with
``TICKQ_TEST_STAFF_HEADER`` set, the dashboard lets in only requests carrying that header,
asked through the Django request (the way ``request.user.is_staff`` would be).
"""

from __future__ import annotations

import os
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import django
from django.conf import settings

from tickq import Queue

q = Queue()


@q.job(max_attempts=1)
def charge(customer: str) -> None:
    raise RuntimeError(f"card declined for {customer}")


def staff_only(request: Any) -> bool:
    header = "HTTP_" + os.environ["TICKQ_TEST_STAFF_HEADER"].upper().replace("-", "_")
    return request.native.META.get(header) == "yes"


settings.configure(
    ROOT_URLCONF=__name__,
    ALLOWED_HOSTS=["127.0.0.1"],
    SECRET_KEY="django-test-" + "x" * 40,
    MIDDLEWARE=["django.middleware.csrf.CsrfViewMiddleware"],  # tickq's views are exempt
    INSTALLED_APPS=[],
)
django.setup()
options = {"auth": staff_only} if os.environ.get("TICKQ_TEST_STAFF_HEADER") else {}
urlpatterns = q.django_urls(dashboard=options)


class Quiet(WSGIRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


if __name__ == "__main__":
    import sys

    from django.core.wsgi import get_wsgi_application

    sys.modules[__name__] = sys.modules["__main__"]
    server = make_server("127.0.0.1", 0, get_wsgi_application(), handler_class=Quiet)
    print(server.server_port, flush=True)
    server.serve_forever()
