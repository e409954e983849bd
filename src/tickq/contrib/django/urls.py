"""``path("api/cron/", include("tickq.contrib.django.urls"))``: ``tick``, ``health`` and
the dashboard under ``tickq/``.

Tick and health are CSRF-exempt; the tick needs ``Authorization: Bearer $CRON_SECRET``, the
health check nothing (point an uptime monitor at it: it tells when the last tick ran and
reveals no job data; with the bearer it also raises the "tick is overdue" alert).
``settings.TICKQ_ENDPOINT`` (a dict) passes options to the endpoint: ``limit``,
``time_budget``, ``expected_interval``, ``allow_get``, ``secret``... The dashboard
(``pip install 'tickq[dashboard]'``) lets in active staff users of Django's own login only
(``request.user``; without Django's authentication middleware, nobody); its actions carry
the dashboard's own CSRF token.
"""

from __future__ import annotations

from typing import Any

from django.urls import path, re_path

app_name = "tickq"


def _view(name: str) -> Any:
    from django.views.decorators.csrf import csrf_exempt

    def tickq_view(request: Any) -> Any:
        from tickq.web.django import view

        route = next(r for r in _endpoint().routes if r.name == name)
        return view(route)(request)

    tickq_view.__name__ = f"tickq_{name}"
    return csrf_exempt(tickq_view)


def _endpoint() -> Any:
    """The endpoint of the default backend's Queue (built again if the Queue was)."""
    from django.conf import settings

    from tickq.contrib.django.backend import backend_for

    def build(q: Any) -> Any:
        options = dict(getattr(settings, "TICKQ_ENDPOINT", {}))
        return q.endpoint(**{"path": "/tick", "health_path": "/health", **options})

    return backend_for(getattr(settings, "TICKQ_BACKEND", "default")).per_queue("endpoint", build)


def staff_only(request: Any) -> bool:
    """The dashboard's auth hook: an active staff user of the host project's login."""
    user = getattr(request.native, "user", None)
    return bool(user is not None and user.is_active and user.is_staff)


def _dashboard_view(request: Any, rest: str = "") -> Any:
    from django.conf import settings

    from tickq.contrib.django.backend import backend_for

    def build(q: Any) -> Any:
        from tickq.dashboard import Dashboard
        from tickq.web.django import view

        return view(Dashboard(q, prefix="/tickq", auth=staff_only).web_route)

    backend = backend_for(getattr(settings, "TICKQ_BACKEND", "default"))
    return backend.per_queue("dashboard", build)(request, rest)


def _csrf_exempt(view: Any) -> Any:
    from django.views.decorators.csrf import csrf_exempt

    return csrf_exempt(view)


urlpatterns = [
    path("tick", _view("tick"), name="tick"),
    path("health", _view("health"), name="health"),
    re_path(r"^tickq/(?P<rest>.*)$", _csrf_exempt(_dashboard_view), name="dashboard"),
]
